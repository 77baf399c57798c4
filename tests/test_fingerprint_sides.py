"""The model fingerprint covers every part, adapted languages included; the photo fingerprint covers what decides
where a photo lands; an index checks the photo side, so it serves a checkpoint that only adds languages and
refuses one whose photos land elsewhere; an index written before photo sides were recorded is checked against the
legacy fingerprint. The torch model and the numpy query path agree on all three."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

import polyvse
from polyvse.adaptation.adapted_checkpoint import with_language_part
from polyvse.index import IndexMismatchError, PhotoIndex, Searcher, check_index_accepts, index_accepts
from polyvse.index.fingerprint import legacy_fingerprint, model_fingerprint, photo_fingerprint
from polyvse.index.store import SAME_LEGACY, SAME_PHOTO_SIDE, model_section
from polyvse.model.checkpoint import Checkpoint, save_checkpoint
from polyvse.model.numpy_serving.tower_query import TowerQueryModel
from polyvse.model.subword_student import SubwordStudent
from polyvse.model.subwords import SubwordSpec
from polyvse.modules import JointEmbeddingModel, ModelConfig
from polyvse.modules.pretrained.captions import PretrainedCaptionEncoder
from test_text_query import _scratch_index
from test_tower_query import EMBED_DIM, IMAGE_DIM, LANGUAGES, TOWER_DIMS, TOWERS

RECORD = {"method": "teacher", "pivot_lang": "en", "lines": 0}


def _trained(seed: int = 0, image_seed: int | None = None) -> Checkpoint:
    """Random heads with per-language parts on the fused towers; ``image_seed``: the image head drawn apart."""
    torch.manual_seed(seed)
    cfg = ModelConfig(
        vocab_size=0,
        text_encoder="pretrained",
        pretrained_dim=sum(TOWER_DIMS),
        pretrained_towers=TOWER_DIMS,
        universal_dim=24,
        embed_dim=EMBED_DIM,
        image_dim=IMAGE_DIM,
        languages=list(LANGUAGES),
    )
    model = JointEmbeddingModel(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.1)
        if image_seed is not None:
            torch.manual_seed(image_seed)
            for p in model.image_head.parameters():
                p.normal_(0.0, 0.1)
    return Checkpoint(
        model=model,
        captions=PretrainedCaptionEncoder(TOWERS),
        backbone="efficientnet-lite0",
        feature_key="k1",
        ten_crop=False,
        languages=list(LANGUAGES),
    )


def _part(seed: int) -> torch.nn.Linear:
    torch.manual_seed(seed)
    return torch.nn.Linear(sum(TOWER_DIMS), 24)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict[str, Path]:
    """trained; adapted (es added); again (es added by another run); subwords (es with a subword student, whose
    table and projection are no model parameters); text (the text side drawn anew, the same image head); photos
    (the same text side, another image head)."""
    root = tmp_path_factory.mktemp("sides")
    trained = _trained()
    student = SubwordStudent(_part(3), SubwordSpec(buckets=64, dim=4))
    with torch.no_grad():
        student.table.weight.normal_()
    other_text = _trained(seed=5)
    other_text.model.image_head.load_state_dict(trained.model.image_head.state_dict())
    made = {
        "trained": trained,
        "adapted": with_language_part(trained, "es", _part(1), RECORD),
        "again": with_language_part(trained, "es", _part(2), RECORD),
        "subwords": with_language_part(trained, "es", student, {**RECORD, "subwords": student.spec.to_dict()}),
        "text": other_text,
        "photos": _trained(image_seed=9),
    }
    return {name: save_checkpoint(ck, root / name) for name, ck in made.items()}


def test_every_part_counts_in_the_model_fingerprint_and_the_photo_side_in_its_own(checkpoints):
    torch_models = {name: polyvse.load(path) for name, path in checkpoints.items()}
    model = {name: model_fingerprint(m) for name, m in torch_models.items()}
    photo = {name: photo_fingerprint(m) for name, m in torch_models.items()}
    # the trained, the adapted and two different adaptation runs: four models
    assert len({model[x] for x in ("trained", "adapted", "again", "subwords")}) == 4
    # ... whose photos land in the same place; a new image head moves them, a new text side does not
    assert photo["trained"] == photo["adapted"] == photo["again"] == photo["subwords"] == photo["text"]
    assert photo["photos"] != photo["trained"] and model["text"] != model["trained"]
    # what indexes and records held before: the adapted parts left out, so a model without any keeps its value
    assert legacy_fingerprint(torch_models["adapted"]) == legacy_fingerprint(torch_models["again"]) == model["trained"]
    assert legacy_fingerprint(torch_models["trained"]) == model["trained"]


@pytest.mark.parametrize("name", ["trained", "adapted", "subwords"])
def test_the_numpy_query_model_and_a_records_provenance_agree_with_the_torch_model(
    checkpoints, name, tmp_path, monkeypatch
):
    from polyvse.provenance import checkpoint_model

    monkeypatch.setenv("POLYVSE_CACHE", str(tmp_path / "cache"))
    reference, fast = polyvse.load(checkpoints[name]), TowerQueryModel.load(checkpoints[name])
    for fingerprint in (model_fingerprint, photo_fingerprint, legacy_fingerprint):
        assert fingerprint(fast) == fingerprint(reference), fingerprint.__name__
    # from the digest cache, a fresh process gets the same values
    again = TowerQueryModel.load(checkpoints[name])
    assert (model_fingerprint(again), photo_fingerprint(again)) == (model_fingerprint(fast), photo_fingerprint(fast))
    block = checkpoint_model(checkpoints[name], config="test")
    assert (block["fingerprint"], block["photo_fingerprint"]) == (
        model_fingerprint(reference),
        photo_fingerprint(reference),
    )


def test_an_index_serves_a_model_that_only_adds_languages_and_refuses_other_photos(checkpoints, tmp_path):
    root = _scratch_index(tmp_path, checkpoints["trained"])
    manifest = json.loads((root / "manifest.json").read_text())["model"]
    trained = polyvse.load(checkpoints["trained"])
    assert (manifest["fingerprint"], manifest["photo_fingerprint"]) == (
        model_fingerprint(trained),
        photo_fingerprint(trained),
    )
    index = PhotoIndex.open(root)
    for name in ("adapted", "subwords", "text"):
        fast = TowerQueryModel.load(checkpoints[name])
        assert check_index_accepts(index, fast) == SAME_PHOTO_SIDE and index_accepts(root, fast)
    adapted = TowerQueryModel.load(checkpoints["adapted"])
    assert len(Searcher(adapted, index).text("un perro corre en la playa", "es", k=3).hits) == 3
    other = TowerQueryModel.load(checkpoints["photos"])
    assert not index_accepts({"model": manifest}, other)
    with pytest.raises(
        IndexMismatchError,
        match=r"whose photos land elsewhere than those of the model given "
        r"\(photo side [0-9a-f]{12} in the index, [0-9a-f]{12} in the "
        r"model\).*rebuild the index",
    ):
        Searcher(other, index)


def test_a_record_of_searches_names_the_model_that_answered_and_the_one_the_index_was_built_with(checkpoints, tmp_path):
    from polyvse.provenance import checkpoint_model, index_model

    root = _scratch_index(tmp_path, checkpoints["trained"])
    built = json.loads((root / "manifest.json").read_text())["model"]
    adapted = index_model(root, checkpoints["adapted"])
    answering = checkpoint_model(checkpoints["adapted"])
    assert adapted["fingerprint"] == answering["fingerprint"] != built["fingerprint"]
    assert adapted["photo_fingerprint"] == built["photo_fingerprint"]
    assert adapted["index_fingerprint"] == built["fingerprint"] and adapted["index"] == str(root)
    # no checkpoint given: the manifest's; one that cannot be read: the manifest's fingerprints stand for it
    assert index_model(root)["fingerprint"] == built["fingerprint"]
    broken = tmp_path / "broken"
    broken.mkdir()
    fallback = index_model(root, broken)
    assert (fallback["fingerprint"], fallback["checkpoint"]) == (built["fingerprint"], str(broken))


def test_an_index_older_than_recorded_photo_sides_is_checked_against_the_legacy_fingerprint(checkpoints, tmp_path):
    """Its manifest holds ``fingerprint`` alone, of the model that built it as fingerprints were then (adapted parts
    left out): that model and the same model with languages added are served; another is told to rebuild. An
    append records the photo side from then on."""
    root = _scratch_index(tmp_path, checkpoints["adapted"])
    path = root / "manifest.json"
    manifest = json.loads(path.read_text())
    adapted = polyvse.load(checkpoints["adapted"])
    del manifest["model"]["photo_fingerprint"]
    manifest["model"]["fingerprint"] = legacy_fingerprint(adapted)  # what the index recorded then
    path.write_text(json.dumps(manifest))
    index = PhotoIndex.open(root)
    for name in ("trained", "adapted", "again", "subwords"):
        assert check_index_accepts(index, TowerQueryModel.load(checkpoints[name])) == SAME_LEGACY, name
    for name in ("text", "photos"):  # unlike a recorded photo side, the legacy value pins the text side too
        with pytest.raises(IndexMismatchError, match="the index predates recorded photo sides.*rebuild the index"):
            check_index_accepts(index, TowerQueryModel.load(checkpoints[name]))
    from polyvse.index.build import _append
    from polyvse.index.store import PhotoEntry, index_lock

    feats = np.random.default_rng(3).normal(size=(1, IMAGE_DIM)).astype(np.float32)
    with index_lock(root):
        _append(
            root,
            index,
            adapted,
            [PhotoEntry(index.count, "new.jpg", str(tmp_path / "new.jpg"))],
            adapted.encode_image_features(feats),
            None,
            None,
            None,
        )
    assert PhotoIndex.open(root).photo_fingerprint == photo_fingerprint(adapted)
    assert check_index_accepts(root, TowerQueryModel.load(checkpoints["text"])) == SAME_PHOTO_SIDE


def test_the_check_reads_no_text_weight_and_from_the_cache_none(checkpoints, tmp_path, monkeypatch):
    """A fresh search process checks its index on the photo side: on a cold digest cache it reads the image head's
    weights only (no adapted part, no subword table), on a warm one no weight at all."""
    monkeypatch.setenv("POLYVSE_CACHE", str(tmp_path / "cache"))
    manifest = {"model": model_section(polyvse.load(checkpoints["trained"]), None)}
    cold = TowerQueryModel.load(checkpoints["subwords"])
    before = set(cold._weights._read)
    check_index_accepts(manifest, cold)
    assert {name.split(".")[0] for name in set(cold._weights._read) - before} == {"image_head"}
    warm = TowerQueryModel.load(checkpoints["subwords"])
    before = set(warm._weights._read)
    check_index_accepts(manifest, warm)
    assert set(warm._weights._read) == before
    copy = tmp_path / "copy"  # a weights file written again is hashed again
    shutil.copytree(checkpoints["subwords"], copy)
    assert len(list((tmp_path / "cache" / "fingerprints").glob("*.json"))) == 1
    check_index_accepts(manifest, TowerQueryModel.load(copy))
    assert len(list((tmp_path / "cache" / "fingerprints").glob("*.json"))) == 2
