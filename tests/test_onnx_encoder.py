"""The ONNX image encoder (polyvse.features.onnx_encoder): the trainer writes it with the checkpoint, it computes
the torch model's vectors (cosine >= 0.9999) and so the same top-10 on an index of real Flickr8k photos, its numpy
preprocessing is torch's to the bit, a stale or missing graph is refused with the command that writes it, and the
photo path it serves imports no torch."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import polyvse
from polyvse.errors import CheckpointError
from polyvse.features.images import load_image
from polyvse.features.onnx_encoder import ENCODER_ENV, ENCODER_FILE, ENCODER_META, NumpyPreprocess, OnnxImageEncoder
from polyvse.index import PhotoIndex, Searcher, build_index
from polyvse.model.checkpoint import load_checkpoint, save_checkpoint
from polyvse.model.loading import photo_model
from polyvse_app.cli import main
from test_index import serving_assets

REPO = Path(__file__).resolve().parents[1]
N_PHOTOS = 80  # real Flickr8k photos in the two indexes


@pytest.fixture(scope="module")
def assets(shared_data, tmp_path_factory):
    return serving_assets(shared_data, tmp_path_factory)


@pytest.fixture(scope="module")
def flickr_photos(shared_data) -> list[Path]:
    photos = sorted((shared_data / "flickr8k" / "images").glob("*.jpg"))[:N_PHOTOS]
    assert len(photos) == N_PHOTOS
    return photos


@pytest.fixture(scope="module")
def both(assets):
    """(the torch model, the ONNX one) of the tiny trained checkpoint."""
    torch_model = polyvse.load(assets.checkpoint, device="cpu")
    os.environ[ENCODER_ENV] = "onnx"
    try:
        onnx_model = photo_model(assets.checkpoint)
    finally:
        del os.environ[ENCODER_ENV]
    return torch_model, onnx_model


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_the_trainer_writes_the_encoder_with_the_checkpoint(assets):
    meta = json.loads((assets.checkpoint / ENCODER_META).read_text())
    assert (assets.checkpoint / ENCODER_FILE).stat().st_size > 1_000_000  # the backbone's weights are in it
    config = json.loads((assets.checkpoint / "config.json").read_text())
    assert meta["feature_key"] == config["image_features"]["key"] and meta["embed_dim"] == 64


def test_onnx_gives_the_torch_vectors_and_the_same_top10_on_real_photos(both, flickr_photos, tmp_path, assets):
    torch_model, onnx_model = both
    images = [load_image(p) for p in flickr_photos]
    a, b = torch_model.encode_image(images), onnx_model.encode_image(images)
    assert a.shape == b.shape == (N_PHOTOS, 64)
    assert _cosines(a, b).min() >= 0.9999

    cache = tmp_path / "features"
    built = {}
    for name, model in (("torch", torch_model), ("onnx", onnx_model)):
        report = build_index(
            model, flickr_photos, tmp_path / name, cache_dir=cache, progress=False, checkpoint_path=assets.checkpoint
        )
        assert report.added == N_PHOTOS
        built[name] = PhotoIndex.open(tmp_path / name)
    assert report.cached == 0 and report.extracted == N_PHOTOS  # the ONNX build: pixels to vectors, no cache
    assert built["torch"].manifest["model"]["fingerprint"] == built["onnx"].manifest["model"]["fingerprint"]
    assert _cosines(np.asarray(built["torch"].vectors), np.asarray(built["onnx"].vectors)).min() >= 0.9999

    searchers = {name: Searcher(model, built[name]) for name, model in (("torch", torch_model), ("onnx", onnx_model))}
    for photo in flickr_photos[:5]:
        top = {name: [h.id for h in s.image(photo, k=10)] for name, s in searchers.items()}
        assert top["torch"] == top["onnx"]
    for query, lang in ((assets.english_query, "en"), (assets.german_query, "de")):
        top = {name: [h.id for h in s.text(query, lang, k=10).hits] for name, s in searchers.items()}
        assert top["torch"] == top["onnx"] and len(top["onnx"]) == 10


@pytest.mark.parametrize("size", [(500, 375), (333, 500), (224, 224), (260, 211)])
@pytest.mark.parametrize("ten_crop,squash", [(False, False), (False, True), (True, False)])
def test_numpy_preprocessing_is_torchs_to_the_bit(size, ten_crop, squash, flickr_photos):
    from PIL import Image

    from polyvse.features.extractor import Preprocess

    settings = dict(
        resize=256,
        crop=224,
        mean=(0.485, 0.456, 0.406),
        std=(0.229, 0.224, 0.225),
        interpolation="bicubic",
        ten_crop=ten_crop,
        squash=squash,
    )
    image = load_image(flickr_photos[0]).resize(size, Image.BILINEAR)
    want = Preprocess(**settings)(image).numpy()
    got = NumpyPreprocess(**settings)(image)
    assert got.shape == ((10,) if ten_crop else (1,)) + want.shape[-3:]
    np.testing.assert_array_equal(got.reshape(want.shape), want)


def test_a_changed_checkpoint_refuses_its_old_graph_and_export_writes_a_new_one(assets, tmp_path, capsys):
    ck = load_checkpoint(assets.checkpoint)
    shutil.copytree(assets.checkpoint, tmp_path / "same")
    save_checkpoint(ck, tmp_path / "same")  # same image weights: the replaced folder's graph is kept
    assert (tmp_path / "same" / ENCODER_FILE).is_file()
    with torch.no_grad():
        for param in ck.model.image_head.parameters():
            param.mul_(-1.0)
    other = tmp_path / "other"
    shutil.copytree(assets.checkpoint, other)
    save_checkpoint(ck, other)  # other image weights: the graph beside the old ones is not carried over
    assert not (other / ENCODER_FILE).exists()
    for name in (ENCODER_FILE, ENCODER_META):  # a stale graph copied back by hand
        shutil.copyfile(assets.checkpoint / name, other / name)
    with pytest.raises(CheckpointError, match="other image weights.*polyvse export onnx --checkpoint"):
        OnnxImageEncoder(other)
    assert main(["export", "onnx", "--checkpoint", str(other)]) == 0
    assert "lowest cosine" in capsys.readouterr().out
    torch_vec = polyvse.load(other, device="cpu").encode_image(load_image(assets.photos[0]))
    onnx_vec = OnnxImageEncoder(other).encode([load_image(assets.photos[0])])
    assert _cosines(torch_vec, onnx_vec).min() >= 0.9999


_NO_TORCH = """
import sys
# an install without torch: every import of torch (or torchvision) fails, as there
for name in ("torch", "torchvision"):
    sys.modules[name] = None
from polyvse_app.cli import main
code = main(sys.argv[1:])
assert not [m for m in sys.modules if m.split(".")[0] in ("torch", "torchvision") and sys.modules[m] is not None]
sys.exit(code)
"""


def without_torch(*argv, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """``polyvse ARGV`` in a process where every import of torch fails, as in the light install (exit 1 if torch
    got imported all the same)."""
    env = {k: v for k, v in os.environ.items() if k != ENCODER_ENV}
    return subprocess.run(
        [sys.executable, "-c", _NO_TORCH, *map(str, argv)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_without_torch_build_add_and_search_run_through_onnx(assets, flickr_photos, tmp_path):
    photos = tmp_path / "photos"
    photos.mkdir()
    for p in flickr_photos[:12]:
        shutil.copyfile(p, photos / p.name)
    index = tmp_path / "index"
    proc = without_torch(
        "index", "build", "--checkpoint", assets.checkpoint, "--images", photos, "--out", index, "--quiet", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert "12 photos indexed" in proc.stdout and "0 from the cache" in proc.stdout
    for p in flickr_photos[12:15]:
        shutil.copyfile(p, photos / p.name)
    proc = without_torch("index", "add", "--index", index, "--images", photos, "--quiet", cwd=tmp_path)
    assert proc.returncode == 0 and "3 photos added, 12 already in the index" in proc.stdout, proc.stderr
    proc = without_torch("search", "--index", index, "--image", flickr_photos[0], "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    hits = json.loads(proc.stdout)["results"]
    assert hits[0]["name"] == flickr_photos[0].name and hits[0]["score"] > 0.999
    proc = without_torch("search", "--index", index, assets.english_query, "--lang", "en", "--json", cwd=tmp_path)
    assert proc.returncode == 0 and len(json.loads(proc.stdout)["results"]) == 10, proc.stderr


def test_without_torch_a_checkpoint_without_its_graph_names_the_command(assets, flickr_photos, tmp_path):
    bare = tmp_path / "checkpoint"
    shutil.copytree(assets.checkpoint, bare, ignore=shutil.ignore_patterns("image_encoder.*"))
    proc = without_torch(
        "index", "build", "--checkpoint", bare, "--list", "/dev/null", "--out", tmp_path / "i", cwd=tmp_path
    )
    assert proc.returncode == 2
    assert f"polyvse export onnx --checkpoint {bare}" in proc.stderr and "polyvse[train]" in proc.stderr
    proc = without_torch("export", "onnx", "--checkpoint", bare, cwd=tmp_path)
    assert proc.returncode == 2 and "needs torch" in proc.stderr and "pip install 'polyvse[train]'" in proc.stderr
