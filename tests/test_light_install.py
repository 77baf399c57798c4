"""`pip install polyvse` without torch: this checkout's wheel in a fresh venv, its base dependencies at the lock's
versions (polyvse_tooling.light_install), then `polyvse index build`, `polyvse search` by text and by photo,
`polyvse serve` (one HTTP query) and `polyvse evaluate` there, on a checkpoint the full install trained (its ONNX
image encoder written by the trainer); the vectors it indexes and the metrics it evaluates are the full install's,
and a command that needs torch says so, with the pip line that installs it."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from polyvse.index import PhotoIndex
from polyvse_tooling.light_install import build_wheel, light_env, make_light_venv, run_polyvse
from test_evaluate_without_torch import assert_same_numbers, own_captions
from test_index import serving_assets

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def light_venv(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("light")
    return make_light_venv(REPO, build_wheel(REPO, tmp / "wheel"), tmp / "venv")


@pytest.fixture(scope="module")
def assets(shared_data, tmp_path_factory):
    return serving_assets(shared_data, tmp_path_factory)


def _polyvse(venv: Path, *argv, cwd: Path) -> subprocess.CompletedProcess:
    proc = run_polyvse(venv, list(argv), cwd, timeout=300)
    assert proc.returncode == 0, f"polyvse {' '.join(map(str, argv))}: {proc.stdout}\n{proc.stderr}"
    return proc


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_base_install_holds_no_torch(light_venv):
    names = {p.name.split("-")[0].lower() for p in (light_venv / "lib").glob("python3*/site-packages/*.dist-info")}
    assert "polyvse" in names and "onnxruntime" in names
    assert not names & {"torch", "torchvision", "triton", "efficientnet_lite_pytorch", "pymilvus", "matplotlib"}


def test_index_search_and_serve_without_torch(light_venv, assets, shared_data, tmp_path):
    import requests

    photos = tmp_path / "photos"
    photos.mkdir()
    for p in sorted((shared_data / "flickr8k" / "images").glob("*.jpg"))[:24]:
        shutil.copyfile(p, photos / p.name)
    index = tmp_path / "index"
    out = _polyvse(
        light_venv,
        "index",
        "build",
        "--checkpoint",
        assets.checkpoint,
        "--images",
        photos,
        "--out",
        index,
        "--quiet",
        cwd=tmp_path,
    ).stdout
    assert "24 photos indexed" in out

    # the vectors are the full install's (torch) to cosine 0.9999
    import polyvse

    model = polyvse.load(assets.checkpoint, device="cpu")
    built = PhotoIndex.open(index)
    want = model.encode_image([p.path for p in built.photos])
    got = np.asarray(built.vectors)
    cos = (want * got).sum(1) / np.linalg.norm(want, axis=1) / np.linalg.norm(got, axis=1)
    assert cos.min() >= 0.9999

    query = sorted(photos.iterdir())[3]
    hits = json.loads(
        _polyvse(light_venv, "search", "--index", index, "--image", query, "--json", cwd=tmp_path).stdout
    )["results"]
    assert hits[0]["name"] == query.name
    hits = json.loads(
        _polyvse(
            light_venv, "search", "--index", index, assets.english_query, "--lang", "en", "--json", cwd=tmp_path
        ).stdout
    )["results"]
    assert len(hits) == 10

    port = _free_port()
    env = light_env()
    server = subprocess.Popen(
        [
            str(light_venv / "bin" / "polyvse"),
            "serve",
            "--index",
            str(index),
            "--port",
            str(port),
            "--no-warm-up",
            "--log-level",
            "warning",
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline, answer = time.time() + 120, None
        while time.time() < deadline and server.poll() is None:
            try:
                with open(query, "rb") as fh:
                    answer = requests.post(
                        f"http://127.0.0.1:{port}/api/search/image",
                        timeout=60,
                        files={"file": (query.name, fh, "image/jpeg")},
                        data={"k": "3"},
                    )
                break
            except requests.ConnectionError:
                time.sleep(0.5)
        assert answer is not None and answer.status_code == 200, server.stdout.read() if server.poll() else answer
        assert answer.json()["results"][0]["name"] == query.name
    finally:
        server.terminate()
        out, _ = server.communicate(timeout=30)
    assert "device: cpu (ONNX Runtime)" in out


def test_evaluate_without_torch_gives_the_full_install_s_metrics(light_venv, assets, shared_data, tmp_path):
    from polyvse_app.cli import main

    captions = own_captions(shared_data, assets.photos[:30], tmp_path / "captions.csv")
    argv = [
        "evaluate",
        "--checkpoint",
        assets.checkpoint,
        "--images",
        assets.photos_dir,
        "--captions",
        captions,
        "--data-root",
        shared_data,
        "--quiet",
        "--json",
    ]
    assert main([*map(str, argv), str(tmp_path / "full.json")]) == 0
    out = _polyvse(light_venv, *argv, tmp_path / "light.json", cwd=tmp_path).stdout
    assert "| en |" in out
    want, got = (json.loads((tmp_path / f"{name}.json").read_text()) for name in ("full", "light"))
    assert want["languages"]["en"]["n_images"] == 30
    assert_same_numbers(want["languages"], got["languages"])
    assert got["retrieval"] == want["retrieval"]


@pytest.mark.parametrize(
    "argv, says",
    [
        (["evaluate", "--task", "words"], "polyvse evaluate --task words needs PyTorch"),
        (["train", "--config", "smoke", "--out", "run"], "polyvse train needs PyTorch"),
    ],
)
def test_a_command_that_needs_torch_says_how_to_install_it(light_venv, assets, tmp_path, argv, says):
    if argv[0] == "evaluate":
        argv = [*argv, "--checkpoint", assets.checkpoint]
    proc = run_polyvse(light_venv, argv, tmp_path, timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert says in proc.stderr and "pip install 'polyvse[train]'" in proc.stderr
    assert "Traceback" not in proc.stderr
