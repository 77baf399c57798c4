"""The photo index: exact / HNSW / model-exact search, append without recomputing, atomic writes, and the
fingerprint that makes an index refuse another model's queries.

`serving_assets` (below) trains one tiny model on a slice of the real F8K-ML photos and copies those photos
into a folder; tests/test_search_cli.py, test_serve.py and test_browser.py import it, so the whole suite
trains once. Photo features come from the session's feature cache (the training run fills it).
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch

import polyvse
from polyvse.errors import CheckpointError, DataError
from polyvse.index import (
    EXACT,
    EXACT_MODEL,
    HNSW,
    IVF,
    IndexFormatError,
    IndexMismatchError,
    PhotoIndex,
    Searcher,
    add_to_index,
    build_index,
    model_fingerprint,
)
from polyvse.index.store import index_lock
from polyvse.util.paths import cache_root

TINY = dict(
    name="serve-tiny",
    languages=["en", "de", "zh"],
    embed_dim=64,
    word_dim=32,
    hidden_dim=64,
    batch_size=32,
    smoke_photos=48,
    smoke_epochs=3,
    lr=5e-4,
)
N_FIRST = 60  # photos in the first build; the rest are appended


@dataclass
class ServingAssets:
    checkpoint: Path
    other_checkpoint: Path  # same shapes and vocabulary, different weights: a different model
    photos_dir: Path  # copies of the training-slice photos (same bytes, so the feature cache hits)
    photos: list[Path]  # sorted
    index: Path  # exact index over photos[:N_FIRST]
    german_query: str  # a German query made of words the tiny model knows
    english_query: str
    tmp: Path

    @property
    def cache_dir(self) -> Path:
        return cache_root() / "features"


_ASSETS: dict[str, ServingAssets] = {}


def _smoke_photo_paths(cfg, root: Path) -> list[Path]:
    """The photos `train(..., smoke=True)` uses (same selection as polyvse_train.data.prepare_data)."""
    from polyvse.data.registry import load_dataset
    from polyvse.data.splits import resolve_split

    corpus = load_dataset(cfg.data.dataset, root).filter(langs=cfg.data.languages)
    train_ids, eval_ids = resolve_split(corpus, cfg.data.split, cfg.data.eval_split)
    ids = set(sorted(train_ids)[: cfg.smoke.photos]) | set(sorted(eval_ids)[: max(cfg.smoke.photos // 2, 8)])
    return [Path(corpus.photos[p].path) for p in sorted(ids)]


def _known_query(model, lang: str, candidates: list[str]) -> str:
    """The first candidate whose words are all in the model's vocabulary (else the one with most known words)."""
    from polyvse.modules.text_input import tag_tokens
    from polyvse.text.tokenize import tokenize

    def known(text):
        toks = [t for t in tokenize(text, lang) if t.isalnum()]
        return sum(tag in model.captions.vocab for tag in tag_tokens(toks, lang)) / max(1, len(toks))

    return max(candidates, key=known)


def serving_assets(shared_data: Path, tmp_path_factory) -> ServingAssets:
    """Train the tiny model and build the base index once per session (memoised)."""
    if "assets" in _ASSETS:
        return _ASSETS["assets"]
    from polyvse.model.checkpoint import load_checkpoint, save_checkpoint
    from polyvse_train.config import TrainConfig
    from polyvse_train.train import train

    tmp = tmp_path_factory.mktemp("serving")
    cfg = TrainConfig(**TINY)
    train(cfg, tmp / "run", shared_data, smoke=True, progress=False)
    checkpoint = tmp / "run" / "checkpoint"

    other = load_checkpoint(checkpoint)
    with torch.no_grad():  # a different model of the same shape: image head weights flipped
        for param in other.model.image_head.parameters():
            param.mul_(-1.0)
    save_checkpoint(other, tmp / "other-checkpoint")

    photos_dir = tmp / "photos"
    photos_dir.mkdir()
    for src in _smoke_photo_paths(cfg, shared_data):
        shutil.copyfile(src, photos_dir / src.name)
    photos = sorted(photos_dir.glob("*.jpg"))
    assert len(photos) > N_FIRST + 5

    model = polyvse.load(checkpoint)
    build_index(
        model,
        photos[:N_FIRST],
        tmp / "index",
        cache_dir=cache_root() / "features",
        checkpoint_path=checkpoint,
        progress=False,
        names=[p.name for p in photos[:N_FIRST]],
    )
    german = _known_query(
        model,
        "de",
        [
            "Ein Hund läuft im Gras",
            "Ein Mann steht auf der Straße",
            "Zwei Hunde spielen im Schnee",
            "Ein Kind spielt im Wasser",
        ],
    )
    english = _known_query(
        model,
        "en",
        [
            "a dog runs through the grass",
            "a man is standing on the street",
            "two dogs are playing in the snow",
            "a child plays in the water",
        ],
    )
    _ASSETS["assets"] = ServingAssets(
        checkpoint, tmp / "other-checkpoint", photos_dir, photos, tmp / "index", german, english, tmp
    )
    return _ASSETS["assets"]


@pytest.fixture(scope="session")
def assets(shared_data, tmp_path_factory) -> ServingAssets:
    return serving_assets(shared_data, tmp_path_factory)


@pytest.fixture(scope="module")
def model(assets):
    return polyvse.load(assets.checkpoint)


def _copy_index(assets, dest: Path) -> Path:
    shutil.copytree(assets.index, dest)
    return dest


# -- building and searching -------------------------------------------------------------------------------
def test_build_writes_manifest_ids_paths_and_exact_search(assets, model):
    index = PhotoIndex.open(assets.index)
    m = index.manifest
    assert index.count == N_FIRST and index.kind == EXACT
    assert m["model"]["fingerprint"] == model_fingerprint(model)
    assert m["model"]["checkpoint"] == str(assets.checkpoint.resolve())
    assert m["model"]["similarity"] == "cosine" and m["model"]["languages"] == ["en", "de", "zh"]
    assert m["search"]["recall_target"] == 0.95 and m["search"]["exact_threshold"] == 20_000
    assert [p.id for p in index.photos] == list(range(N_FIRST))
    assert [p.name for p in index.photos] == [p.name for p in assets.photos[:N_FIRST]]
    assert all(Path(p.path).is_file() for p in index.photos)
    files = {f.name for f in assets.index.iterdir()}
    assert {"manifest.json", m["files"]["vectors"], m["files"]["photos"]} <= files
    # stored vectors are L2-normalised; the search is exact cosine, best first
    assert np.allclose(np.linalg.norm(index.vectors, axis=1), 1.0, atol=1e-5)
    searcher = Searcher(model, index)
    result = searcher.text(assets.english_query, "en", k=10)
    assert [h.rank for h in result.hits] == list(range(1, 11))
    q = model.encode_text([assets.english_query], "en")
    from polyvse.features.cache import extract_features

    feats = extract_features([p.path for p in index.photos], model.extractor, assets.cache_dir, progress=False)
    assert feats.extracted == 0  # all from the feature cache
    expected = model.similarity(model.encode_image_features(feats.features), q)[:, 0]
    order = np.argsort(-expected, kind="stable")[:10]
    assert [h.id for h in result.hits] == order.tolist()
    assert np.allclose([h.score for h in result.hits], expected[order], atol=1e-4)


def test_search_by_photo_finds_the_photo_itself(assets, model):
    searcher = Searcher(model, PhotoIndex.open(assets.index))
    target = assets.photos[7]
    hits = searcher.image(target, k=3)
    assert hits[0].id == 7 and hits[0].name == target.name and hits[0].score == pytest.approx(1.0, abs=1e-4)
    similar = searcher.similar(7, k=5)
    assert len(similar) == 5 and 7 not in [h.id for h in similar]
    assert similar[0].id == hits[1].id


def test_queries_are_checked(assets, model):
    searcher = Searcher(model, PhotoIndex.open(assets.index))
    with pytest.raises(DataError, match="empty"):
        searcher.text("   ", "en")
    with pytest.raises(DataError, match="10000 characters long; the limit is 1000"):
        searcher.text("a" * 10_000, "en")
    with pytest.raises(CheckpointError, match="not trained on 'fr'"):
        searcher.text(assets.english_query, "fr")
    with pytest.raises(ValueError, match="unknown language code 'xx'"):
        searcher.text(assets.english_query, "xx")
    with pytest.raises(DataError, match="none of the words"):
        searcher.text("qqqzzz xxyyzz", "en")
    with pytest.raises(DataError, match="k must be between"):
        searcher.text(assets.english_query, "en", k=0)
    with pytest.raises(DataError, match="no photo with id 999"):
        searcher.similar(999)


# -- appending --------------------------------------------------------------------------------------------
def test_add_embeds_only_new_photos(assets, model, tmp_path, monkeypatch):
    root = _copy_index(assets, tmp_path / "index")
    before = PhotoIndex.open(root)
    old_vectors = np.array(before.vectors)
    encoded = Counter()
    original = model.encode_image_features

    def counting(feats):
        encoded["rows"] += len(feats)
        return original(feats)

    monkeypatch.setattr(model, "encode_image_features", counting)
    report = add_to_index(model, root, assets.photos, cache_dir=assets.cache_dir, progress=False)
    n_new = len(assets.photos) - N_FIRST
    assert (report.added, report.already_indexed, report.extracted) == (n_new, N_FIRST, 0)
    assert encoded["rows"] == n_new  # the indexed photos were not embedded again
    after = PhotoIndex.open(root)
    assert after.count == len(assets.photos) and after.kind == EXACT
    assert np.array_equal(np.asarray(after.vectors[:N_FIRST]), old_vectors)
    assert [p.name for p in after.photos] == [p.name for p in assets.photos]
    assert after.manifest["generation"] == before.manifest["generation"] + 1
    assert sorted(f.name for f in root.iterdir() if f.name.startswith(("vectors.", "photos."))) == sorted(
        [after.manifest["files"]["vectors"], after.manifest["files"]["photos"]]
    )  # old generation removed
    # the appended photos are searchable
    hits = Searcher(model, after).image(assets.photos[-1], k=1)
    assert hits[0].id == len(assets.photos) - 1
    # adding the same photos again is a no-op
    again = add_to_index(model, root, assets.photos[-3:], cache_dir=assets.cache_dir, progress=False)
    assert (again.added, again.already_indexed) == (0, 3)
    assert PhotoIndex.open(root).manifest["generation"] == after.manifest["generation"]


def test_unreadable_photos_are_reported_and_skipped(assets, model, tmp_path):
    bad = tmp_path / "broken.jpg"
    bad.write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    report = build_index(model, [assets.photos[0], bad], tmp_path / "idx", cache_dir=assets.cache_dir, progress=False)
    assert report.added == 1 and report.index.count == 1
    assert report.failures and report.failures[0][0] == str(bad)
    with pytest.raises(DataError, match="none of the 1 photos could be read"):
        build_index(model, [bad], tmp_path / "idx2", cache_dir=assets.cache_dir, progress=False)


def test_build_refuses_to_clobber(assets, model, tmp_path):
    with pytest.raises(DataError, match="already an index"):
        build_index(model, assets.photos[:2], assets.index, cache_dir=assets.cache_dir, progress=False)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("mine")
    with pytest.raises(DataError, match="not empty and not an index"):
        build_index(model, assets.photos[:2], tmp_path / "full", cache_dir=assets.cache_dir, progress=False)
    forced = build_index(
        model,
        assets.photos[:3],
        _copy_index(assets, tmp_path / "copy"),
        cache_dir=assets.cache_dir,
        progress=False,
        overwrite=True,
    )
    assert forced.index.count == 3


# -- approximate search -----------------------------------------------------------------------------------
def _same_top5(assets, model, approx_index):
    exact = Searcher(model, PhotoIndex.open(assets.index)).text(assets.english_query, "en", k=5)
    approx = Searcher(model, approx_index).text(assets.english_query, "en", k=5)
    assert [h.id for h in approx.hits] == [h.id for h in exact.hits]
    assert np.allclose([h.score for h in approx.hits], [h.score for h in exact.hits], atol=1e-5)


def test_ivf_above_threshold_meets_recall_target_and_grows(assets, model, tmp_path):
    report = build_index(
        model,
        assets.photos[:N_FIRST],
        tmp_path / "ivf",
        cache_dir=assets.cache_dir,
        exact_threshold=N_FIRST - 10,
        progress=False,
    )
    index = report.index
    s = index.manifest["search"]
    assert index.kind == IVF and s["measured_recall"] >= s["recall_target"] == 0.95
    assert s["ivf"]["nlist"] >= 1 and 1 <= s["ivf"]["nprobe"] <= s["ivf"]["nlist"]
    assert s["ivf"]["trained_on"] == N_FIRST
    assert (tmp_path / "ivf" / index.manifest["files"]["ann"]).is_file()
    _same_top5(assets, model, index)
    grown = add_to_index(model, tmp_path / "ivf", assets.photos, cache_dir=assets.cache_dir, progress=False)
    assert grown.index.kind == IVF and grown.index.count == len(assets.photos)
    assert grown.index.manifest["search"]["ivf"]["trained_on"] == N_FIRST  # new rows added, lists kept
    assert grown.index.manifest["search"]["measured_recall"] >= 0.95
    assert Searcher(model, grown.index).image(assets.photos[-1], k=1)[0].id == len(assets.photos) - 1


def test_hnsw_on_request(assets, model, tmp_path):
    report = build_index(
        model, assets.photos[:N_FIRST], tmp_path / "hnsw", cache_dir=assets.cache_dir, kind="hnsw", progress=False
    )
    index = report.index
    assert index.kind == HNSW and index.manifest["search"]["measured_recall"] >= 0.95
    assert index.manifest["search"]["hnsw"]["ef_search"] >= 10
    _same_top5(assets, model, index)
    grown = add_to_index(model, tmp_path / "hnsw", assets.photos, cache_dir=assets.cache_dir, progress=False)
    assert grown.index.kind == HNSW and grown.index.count == len(assets.photos)
    assert Searcher(model, grown.index).image(assets.photos[-1], k=1)[0].id == len(assets.photos) - 1


def test_exact_index_becomes_ivf_when_it_crosses_the_threshold(assets, model, tmp_path):
    build_index(
        model,
        assets.photos[:N_FIRST],
        tmp_path / "i",
        cache_dir=assets.cache_dir,
        exact_threshold=N_FIRST + 2,
        progress=False,
    )
    assert PhotoIndex.open(tmp_path / "i").kind == EXACT
    report = add_to_index(model, tmp_path / "i", assets.photos, cache_dir=assets.cache_dir, progress=False)
    assert report.index.kind == IVF and report.index.manifest["search"]["measured_recall"] >= 0.95


def test_non_cosine_model_falls_back_to_exact_model_scoring(assets, tmp_path):
    from polyvse.similarity import OrderSimilarity

    order_model = polyvse.load(assets.checkpoint)
    order_model.model.similarity = OrderSimilarity()
    for kind in ("hnsw", "ivf"):
        with pytest.raises(DataError, match="no inner-product index"):
            build_index(
                order_model, assets.photos[:5], tmp_path / "no", cache_dir=assets.cache_dir, kind=kind, progress=False
            )
    report = build_index(
        order_model,
        assets.photos[:N_FIRST],
        tmp_path / "order",
        cache_dir=assets.cache_dir,
        exact_threshold=10,
        progress=False,
    )
    index = report.index
    assert index.kind == EXACT_MODEL and index.similarity == "order"
    assert index.fingerprint != PhotoIndex.open(assets.index).fingerprint
    searcher = Searcher(order_model, index)
    hits = searcher.text(assets.english_query, "en", k=8)
    q = order_model.encode_text([assets.english_query], "en")
    expected = order_model.similarity(np.array(index.vectors), q)[:, 0]
    order = np.lexsort((np.arange(len(expected)), -expected))[:8]
    assert [h.id for h in hits.hits] == order.tolist()
    assert np.allclose([h.score for h in hits.hits], expected[order], rtol=1e-5, atol=1e-5)
    # the cosine model cannot query it, and vice versa
    with pytest.raises(IndexMismatchError):
        Searcher(polyvse.load(assets.checkpoint), index)


# -- the fingerprint: another model is refused ------------------------------------------------------------
def test_index_refuses_another_model(assets, tmp_path):
    other = polyvse.load(assets.other_checkpoint)
    index = PhotoIndex.open(assets.index)
    assert model_fingerprint(other) != index.fingerprint
    assert model_fingerprint(polyvse.load(assets.checkpoint)) == index.fingerprint  # stable across loads
    with pytest.raises(
        IndexMismatchError, match="built with model .* whose photos land elsewhere than those of the model given"
    ):
        Searcher(other, index)
    with pytest.raises(IndexMismatchError, match="rebuild the index"):
        add_to_index(
            other, _copy_index(assets, tmp_path / "i"), assets.photos[-2:], cache_dir=assets.cache_dir, progress=False
        )


# -- atomicity, locking, damage ---------------------------------------------------------------------------
def test_a_write_killed_midway_leaves_the_previous_generation(assets, model, tmp_path, monkeypatch):
    import polyvse.model.checkpoint as ckpt_module

    root = _copy_index(assets, tmp_path / "index")
    gen = PhotoIndex.open(root).manifest["generation"]

    def die(*args, **kwargs):
        raise KeyboardInterrupt("killed while switching the manifest")

    monkeypatch.setattr(ckpt_module, "write_json_atomic", die)
    with pytest.raises(KeyboardInterrupt):
        add_to_index(model, root, assets.photos, cache_dir=assets.cache_dir, progress=False)
    monkeypatch.undo()
    survivor = PhotoIndex.open(root)
    assert survivor.count == N_FIRST and survivor.manifest["generation"] == gen
    assert Searcher(model, survivor).image(assets.photos[3], k=1)[0].id == 3
    # the next write succeeds and sweeps the orphaned files of the killed one
    report = add_to_index(model, root, assets.photos, cache_dir=assets.cache_dir, progress=False)
    assert report.index.count == len(assets.photos)
    leftovers = [f.name for f in root.iterdir() if f.name not in ("manifest.json", ".lock")]
    assert sorted(leftovers) == sorted(
        [report.index.manifest["files"]["vectors"], report.index.manifest["files"]["photos"]]
    )


def test_second_writer_is_refused_while_one_holds_the_lock(assets, model, tmp_path):
    root = _copy_index(assets, tmp_path / "index")
    with index_lock(root):
        with pytest.raises(DataError, match="another `polyvse index` process is writing"):
            add_to_index(model, root, assets.photos, cache_dir=assets.cache_dir, progress=False)


def test_damaged_or_wrong_folders_fail_clearly(assets, tmp_path):
    with pytest.raises(IndexFormatError, match="no index folder"):
        PhotoIndex.open(tmp_path / "nothing")
    with pytest.raises(IndexFormatError, match="looks like a checkpoint"):
        PhotoIndex.open(assets.checkpoint)
    root = _copy_index(assets, tmp_path / "index")
    vec = root / json.loads((root / "manifest.json").read_text())["files"]["vectors"]
    vec.write_bytes(vec.read_bytes()[:-100])
    with pytest.raises(IndexFormatError, match="damaged"):
        PhotoIndex.open(root)
    root2 = _copy_index(assets, tmp_path / "index2")
    manifest = json.loads((root2 / "manifest.json").read_text())
    manifest["format_version"] = 99
    (root2 / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(IndexFormatError, match="format version 99"):
        PhotoIndex.open(root2)


def test_a_damaged_photo_list_names_its_line(tmp_path):
    """read_photos parses the whole list at once; a bad or out-of-order line is still named by its number."""
    from polyvse.index.store import read_photos

    good = [json.dumps({"id": i, "name": f"p{i}.jpg", "path": f"/x/p{i}.jpg"}) for i in range(4)]
    path = tmp_path / "photos.jsonl"
    path.write_text("\n".join(good) + "\n")
    assert [p.name for p in read_photos(path, 4)] == ["p0.jpg", "p1.jpg", "p2.jpg", "p3.jpg"]
    for bad, where in (
        (good[:2] + ['{"id": 2, "name": "p2.jpg"'] + good[3:], ":3: bad photo line"),
        (good[:2] + ['{"id": 2, "name": "p2.jpg"}'] + good[3:], ":3: bad photo line"),
        ([good[0], good[2], good[1], good[3]], ":2: photo id 2 out of order"),
    ):
        path.write_text("\n".join(bad) + "\n")
        with pytest.raises(IndexFormatError, match=where):
            read_photos(path, 4)
    path.write_text("\n".join(good[:3]) + "\n")
    with pytest.raises(IndexFormatError, match="3 photo lines, the manifest says 4"):
        read_photos(path, 4)
