"""The frozen fronts through ONNX Runtime (polyvse.util.frozen_onnx): e5's front and the cut image backbone
export, run, agree with torch, and cache apart from torch under keys naming the runtime."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
import torch
from PIL import Image

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

from polyvse.errors import DataError  # noqa: E402
from polyvse.util.frozen_onnx import RUNTIME_ENV, front_runtime  # noqa: E402

TEXTS = [
    "A dog runs across the grass.",
    "Zwei Kinder spielen im Schnee vor einem Haus.",
    "Hi",
    "A man in a red jacket is climbing a steep rock face while another man watches from below.",
]


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = a.astype(np.float64), b.astype(np.float64)
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


@pytest.fixture(scope="module")
def e5_fronts(tmp_path_factory):
    """e5 cut before its last 11 layers (a one-layer front: a fast export), in torch and through ONNX Runtime."""
    from polyvse.modules.pretrained.e5.front_onnx import OnnxE5Front
    from polyvse.modules.pretrained.e5.tail import E5Front

    torch_front = E5Front(11)
    return torch_front, OnnxE5Front(11, f=torch_front.file, cache_dir=tmp_path_factory.mktemp("e5"), threads=1)


def test_e5_front_graph_agrees_with_torch(e5_fronts):
    torch_front, ort_front = e5_fronts
    a, b = torch_front.states(TEXTS), ort_front.states(TEXTS, batch_size=3)  # other batches than torch's
    assert ort_front.path.is_file() and ort_front.path.parent.name == "onnx"
    for x, y in zip(a, b):
        assert x.shape == y.shape and y.dtype == np.float16  # each sentence's own tokens, as the cache keeps them
        assert _cosines(x, y).min() >= 0.9999
        assert np.abs(x.astype(np.float32) - y.astype(np.float32)).max() < 0.05
    # dynamic batch and tokens: one sentence alone gives its states of a batch
    np.testing.assert_allclose(ort_front.states(TEXTS[3:])[0].astype(np.float32), b[3].astype(np.float32), atol=2e-2)


def test_e5_front_of_no_layers_runs_without_a_mask(tmp_path):
    """Every layer trained (text_finetune_layers: 12): the front is the embedding layer alone, whose graph has no
    mask input."""
    from polyvse.modules.pretrained.e5.front_onnx import OnnxE5Front
    from polyvse.modules.pretrained.e5.tail import E5Front

    torch_front = E5Front(12)
    ort_front = OnnxE5Front(12, f=torch_front.file, cache_dir=tmp_path, threads=1)
    for x, y in zip(torch_front.states(TEXTS), ort_front.states(TEXTS)):
        assert x.shape == y.shape and _cosines(x, y).min() >= 0.9999


def test_e5_state_cache_keys_differ_by_runtime(e5_fronts, tmp_path):
    from polyvse.modules.pretrained.e5.states_cache import HiddenStateCache, states_cached

    torch_front, ort_front = e5_fronts
    torch_cache, ort_cache = (HiddenStateCache.for_front(tmp_path, f) for f in (torch_front, ort_front))
    assert "runtime" not in torch_cache.cache_id  # torch's key as it always was: its caches stay valid
    assert ort_cache.cache_id == torch_cache.cache_id + "|runtime=ort"
    assert ort_cache.dir != torch_cache.dir
    states_cached(ort_front, TEXTS[:2], tmp_path)
    assert len(HiddenStateCache.for_front(tmp_path, ort_front)) == 2
    assert len(HiddenStateCache.for_front(tmp_path, torch_front)) == 0  # never read as torch's


def test_make_front_follows_the_setting(monkeypatch, tmp_path):
    from polyvse.modules.pretrained.e5.front_onnx import OnnxE5Front, make_front
    from polyvse.modules.pretrained.e5.tail import E5Front

    monkeypatch.setenv(RUNTIME_ENV, "torch")
    assert isinstance(make_front(12, cache_dir=tmp_path), E5Front)
    monkeypatch.setenv(RUNTIME_ENV, "onnx")
    assert isinstance(make_front(12, cache_dir=tmp_path), OnnxE5Front)
    monkeypatch.delenv(RUNTIME_ENV)
    assert isinstance(make_front(12, cache_dir=tmp_path), OnnxE5Front)  # auto: ONNX Runtime on the CPU
    assert isinstance(make_front(12, cache_dir=tmp_path, runtime="torch"), E5Front)


def test_front_runtime_setting(monkeypatch):
    monkeypatch.delenv(RUNTIME_ENV, raising=False)
    assert front_runtime("cpu") == "onnx" and front_runtime("cuda") == "torch"
    monkeypatch.setenv(RUNTIME_ENV, "torch")
    assert front_runtime("cpu") == "torch"
    monkeypatch.setenv(RUNTIME_ENV, "tensorrt")
    with pytest.raises(DataError, match=RUNTIME_ENV):
        front_runtime("cpu")


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    folder = tmp_path_factory.mktemp("photos")
    rng = np.random.default_rng(0)
    paths = []
    for i, (w, h) in enumerate([(300, 260), (260, 340), (280, 280)]):
        p = folder / f"p{i}.png"
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(p)
        paths.append(p)
    return paths


def test_cut_backbone_graph_fills_its_own_cache(photos, tmp_path, monkeypatch):
    from polyvse.features.backbones import get_extractor
    from polyvse.features.cache import extract_features

    ext = get_extractor("efficientnet-lite0:tail1", _random_init=True)
    assert ext.runtime == "torch" and ext.cache_key == ext.key  # no cache to keep a graph in: torch
    direct = ext.extract([Image.open(p) for p in photos])
    monkeypatch.delenv(RUNTIME_ENV, raising=False)
    ort = extract_features(photos, ext, tmp_path, progress=False)
    assert ext.runtime == "onnx" and ext.cache_key == ext.key + ".ort" and ort.key == ext.key
    assert (tmp_path / ext.cache_key / "meta.json").is_file() and not (tmp_path / ext.key).exists()
    graphs = list((tmp_path / "onnx").glob("*.onnx"))
    assert len(graphs) == 1
    assert _cosines(ort.features, direct).min() >= 0.9999
    assert np.abs(ort.features - direct).max() < 1e-3

    monkeypatch.setenv(RUNTIME_ENV, "torch")
    again = extract_features(photos, ext, tmp_path, progress=False)
    assert again.extracted == 3 and again.cached == 0  # torch never reads what ONNX Runtime computed
    assert (tmp_path / ext.key / "meta.json").is_file()
    np.testing.assert_allclose(again.features, direct, rtol=0, atol=1e-5)
    monkeypatch.delenv(RUNTIME_ENV)
    assert extract_features(photos, ext, tmp_path, progress=False).cached == 3
    assert list((tmp_path / "onnx").glob("*.onnx")) == graphs  # the graph is reused, not exported again


def test_cut_graph_copies_share_or_rebuild_the_session(photos, tmp_path):
    from polyvse.features.augment import view_extractor
    from polyvse.features.backbones import get_extractor
    from polyvse.features.cut_onnx import cut_graph_path

    ext = get_extractor("efficientnet-lite0:tail1", _random_init=True)
    ext.keep_graphs_in(tmp_path)
    view = view_extractor(ext, 1, 0.5)
    assert view.graph is ext.graph and view.cache_key != ext.cache_key  # one session, its own cache key
    x = torch.stack([ext.transform(Image.open(p).convert("RGB")) for p in photos])
    out = ext.forward_batch(x)
    assert out.shape == (3, ext.dim) and cut_graph_path(ext, tmp_path).is_file()
    clone = pickle.loads(pickle.dumps(ext.graph))
    assert clone.graph_dir == ext.graph.graph_dir and clone._session is None
    assert copy.deepcopy(ext.graph)._session is None
    other = get_extractor("efficientnet-lite0:tail2", _random_init=True)
    assert cut_graph_path(other, tmp_path) != cut_graph_path(ext, tmp_path)  # another cut: another graph
