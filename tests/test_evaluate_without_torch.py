"""`polyvse evaluate` without torch (the light install's path: the numpy text model and the checkpoint's ONNX image
encoder, polyvse.model.loading.photo_model) gives the torch path's metrics, to 1e-3, on the tiny trained checkpoint:
retrieval on your own photos and captions (the model's similarity, and CSLS against banks, with the checkpoint's k,
another k and switched off), STS and the languages table; it imports no torch doing so. A task only torch computes
(words) and a command that needs torch (train, rerank) say so and how to install it, with exit code 2."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from polyvse_app.cli import main
from test_index import serving_assets
from test_onnx_encoder import without_torch

N_PHOTOS = 40


@pytest.fixture(scope="module")
def assets(shared_data, tmp_path_factory):
    return serving_assets(shared_data, tmp_path_factory)


def own_captions(shared_data: Path, photos: list[Path], out: Path) -> Path:
    """Flickr8k's English captions of ``photos`` as a captions file (image, lang, caption)."""
    names = {p.name for p in photos}
    with (
        open(shared_data / "flickr8k" / "captions.txt", encoding="utf-8", newline="") as fh,
        open(out, "w", encoding="utf-8", newline="") as dst,
    ):
        writer = csv.writer(dst)
        writer.writerow(["image", "lang", "caption"])
        for row in csv.DictReader(fh):
            if row["image"] in names:
                writer.writerow([row["image"], "en", row["caption"]])
    return out


@pytest.fixture(scope="module")
def own_data(assets, shared_data, tmp_path_factory) -> tuple[Path, Path]:
    """(a folder of the first training-slice photos, their English captions)."""
    tmp = tmp_path_factory.mktemp("own")
    photos = tmp / "photos"
    photos.mkdir()
    for p in assets.photos[:N_PHOTOS]:
        (photos / p.name).write_bytes(p.read_bytes())
    return photos, own_captions(shared_data, assets.photos[:N_PHOTOS], tmp / "captions.csv")


@pytest.fixture(scope="module")
def csls_checkpoint(assets, own_data, tmp_path_factory) -> Path:
    """The tiny checkpoint scoring retrieval with CSLS (k 3) against banks of its own photo and caption vectors,
    its ONNX image encoder kept (the image weights are the same)."""
    import polyvse
    from polyvse.csls.banks import HubnessBanks
    from polyvse.model.checkpoint import load_checkpoint, save_checkpoint

    model = polyvse.load(assets.checkpoint, device="cpu")
    photos = model.encode_image(assets.photos[N_PHOTOS : N_PHOTOS + 16])
    texts = [row["caption"] for row in csv.DictReader(open(own_data[1], encoding="utf-8"))]
    ck = load_checkpoint(assets.checkpoint)
    ck.hubness = HubnessBanks(
        photos,
        {
            "en": model.encode_text(texts[::3], "en"),
            "de": model.encode_text(["ein Hund", "ein Mann", "zwei Kinder"] * 2, "de"),
        },
        k=3,
    )
    out = tmp_path_factory.mktemp("csls") / "checkpoint"
    save_checkpoint(ck, out, image_encoder=assets.checkpoint)
    assert (out / "image_encoder.onnx").is_file()
    return out


def both_ways(argv: list, tmp_path: Path) -> tuple[dict, dict]:
    """The JSON of `polyvse evaluate ARGV` with torch (this process) and without it (a subprocess)."""
    assert main(["evaluate", *map(str, argv), "--json", str(tmp_path / "torch.json"), "--quiet"]) == 0
    proc = without_torch("evaluate", *argv, "--json", tmp_path / "numpy.json", "--quiet", cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return (json.loads((tmp_path / "torch.json").read_text()), json.loads((tmp_path / "numpy.json").read_text()))


def assert_same_numbers(want, got, where: str = "") -> None:
    """Every number of ``got`` within 1e-3 of ``want``'s; everything else equal (the same keys)."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), (where, set(got) ^ set(want))
        for key in want:
            assert_same_numbers(want[key], got[key], f"{where}/{key}")
    elif isinstance(want, (int, float)) and not isinstance(want, bool):
        assert got == pytest.approx(want, abs=1e-3), where
    else:
        assert got == want, where


def retrieval_argv(checkpoint: Path, own_data, shared_data) -> list:
    photos, captions = own_data
    return ["--checkpoint", checkpoint, "--images", photos, "--captions", captions, "--data-root", shared_data]


def test_retrieval_without_torch_equals_the_torch_path(assets, own_data, shared_data, tmp_path):
    want, got = both_ways(retrieval_argv(assets.checkpoint, own_data, shared_data), tmp_path)
    assert want["languages"]["en"]["n_images"] == N_PHOTOS and want["languages"]["en"]["n_captions"] >= 4 * N_PHOTOS
    assert want["retrieval"] == {"scoring": "similarity"}
    assert_same_numbers(want["languages"], got["languages"])
    for key in ("retrieval", "served_as", "skipped_languages", "n_failed_photos", "split"):
        assert got[key] == want[key], key


@pytest.mark.parametrize(
    "scoring", [[], ["--csls-k", "2"], ["--scoring", "similarity"]], ids=["checkpoint-k", "other-k", "similarity"]
)
def test_csls_retrieval_without_torch_equals_the_torch_path(csls_checkpoint, own_data, shared_data, tmp_path, scoring):
    want, got = both_ways(retrieval_argv(csls_checkpoint, own_data, shared_data) + scoring, tmp_path)
    expected_k = 2 if "--csls-k" in scoring else 3
    if scoring[:1] == ["--scoring"]:
        assert want["retrieval"] == {"scoring": "similarity"}
    else:
        assert want["retrieval"]["scoring"] == "csls" and want["retrieval"]["k"] == expected_k
    assert got["retrieval"] == want["retrieval"]
    assert_same_numbers(want["languages"], got["languages"])


def test_csls_scores_are_torch_s_to_float_precision(csls_checkpoint):
    """The numpy CSLS matrix (polyvse.evaluation.base.numpy_csls_scores) is HubnessBanks.scores' one."""
    import polyvse
    from polyvse.evaluation.base import search_scores
    from polyvse.model.loading import query_model

    torch_model, numpy_model = polyvse.load(csls_checkpoint, device="cpu"), query_model(csls_checkpoint)
    rng = np.random.default_rng(0)
    images, texts = rng.standard_normal((7, torch_model.embed_dim)), rng.standard_normal((5, torch_model.embed_dim))
    for lang in ("en", "de", "fr", None):
        want = search_scores(torch_model, lang)(images, texts)
        got = search_scores(numpy_model, lang)(images, texts)
        assert isinstance(got, np.ndarray) and got.shape == (7, 5)
        np.testing.assert_allclose(got, want, atol=1e-5)


def test_sts_and_languages_without_torch_equal_the_torch_path(assets, shared_data, tmp_path):
    root = ["--data-root", shared_data]
    want, got = both_ways(["--checkpoint", assets.checkpoint, "--task", "sts", *root], tmp_path)
    assert set(want["result"]) == {"sts12-msrvid", "sts14-images", "sts15-images"}
    assert_same_numbers(want["result"], got["result"])
    want, got = both_ways(
        ["--checkpoint", assets.checkpoint, "--task", "languages", "--langs", "es,qu", "--max-photos", "30", *root],
        tmp_path,
    )
    assert want["result"]["en"]["test"]["n_images"] == 30 and want["result"]["qu"]["status"] is None
    assert_same_numbers(want["result"], got["result"])


def test_words_without_torch_says_it_needs_torch(assets, shared_data, tmp_path):
    proc = without_torch(
        "evaluate",
        "--checkpoint",
        assets.checkpoint,
        "--task",
        "words",
        "--data-root",
        shared_data,
        cwd=tmp_path,
        timeout=600,
    )
    assert proc.returncode == 2, proc.stderr
    assert "polyvse evaluate --task words needs PyTorch" in proc.stderr
    assert "pip install 'polyvse[train]'" in proc.stderr and "Traceback" not in proc.stderr


def test_retrieval_without_torch_or_its_graph_names_the_command(assets, own_data, shared_data, tmp_path):
    import shutil

    bare = tmp_path / "checkpoint"
    shutil.copytree(assets.checkpoint, bare, ignore=shutil.ignore_patterns("image_encoder.*"))
    proc = without_torch("evaluate", *retrieval_argv(bare, own_data, shared_data), cwd=tmp_path, timeout=600)
    assert proc.returncode == 2
    assert f"polyvse export onnx --checkpoint {bare}" in proc.stderr and "Traceback" not in proc.stderr
