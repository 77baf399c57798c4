"""A full disk during `polyvse index build`, `polyvse index add` and a checkpoint save: the command stops with a
message naming the file, the bytes it needs and those free; the index's previous generation (or the checkpoint
that was there) stays intact and loads, and no half-written file is left to fill the disk further.

The disk is real: a small tmpfs mounted for each test (`mount -t tmpfs -o size=...`, which needs root, as this
suite's machine has it), filled up to a few KiB with a filler file. Where mounting is not permitted the tests are
skipped, saying so: an injected ENOSPC would not show how numpy, FAISS and safetensors each report a full disk.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import polyvse
from polyvse.index import PhotoIndex, Searcher, add_to_index
from polyvse.util.atomic import DiskFullError, free_bytes
from polyvse_app.cli import main
from test_index import N_FIRST, assets, model  # noqa: F401 (fixtures)

DISK = 4 << 20


@pytest.fixture
def small_disk(tmp_path):
    """``path``: a DISK-byte tmpfs folder, unmounted afterwards; ``fill(leave)`` leaves ``leave`` bytes free on it."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK}", "tmpfs", str(mnt)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip()}): a real full disk needs root")

    def fill(leave: int) -> None:
        filler = mnt / "filler"
        with open(filler, "ab") as fh:  # allocated, not sparse: tmpfs counts it
            os.posix_fallocate(fh.fileno(), fh.tell(), free_bytes(mnt) - leave)
        assert abs(free_bytes(mnt) - leave) <= 4096, free_bytes(mnt)

    try:
        yield SimpleNamespace(path=mnt, fill=fill)
    finally:
        # lazily: an index opened by the test may still map a file of it until it is collected
        subprocess.run(["umount", "--lazy", str(mnt)], check=True)


def generation_files(root: Path) -> list[str]:
    return sorted(f for f in os.listdir(root) if f not in ("manifest.json", ".lock"))


def test_build_on_a_full_disk_names_the_file_and_the_bytes(assets, small_disk, capsys):  # noqa: F811
    small_disk.fill(8192)  # room for less than the vectors (60 photos x 64-d x 4 bytes, and the header)
    out = small_disk.path / "index"
    code = main(
        [
            "index",
            "build",
            "--checkpoint",
            str(assets.checkpoint),
            "--images",
            str(assets.photos_dir),
            "--out",
            str(out),
            "--cache-dir",
            str(assets.cache_dir),
            "--quiet",
            "--device",
            "cpu",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    n = len(assets.photos)
    assert f"vectors.1.npy: no space left on the device: writing it needs {n * 64 * 4 + 128:,} bytes" in err
    assert "bytes are free there" in err
    assert generation_files(out) == [] and not (out / "manifest.json").exists()


def test_add_on_a_full_disk_keeps_the_previous_generation(assets, model, small_disk, capsys):  # noqa: F811
    root = shutil.copytree(assets.index, small_disk.path / "index")
    before = PhotoIndex.open(root)
    files = generation_files(root)
    small_disk.fill(4096)
    code = main(
        [
            "index",
            "add",
            "--index",
            str(root),
            "--images",
            str(assets.photos_dir),
            "--cache-dir",
            str(assets.cache_dir),
            "--quiet",
            "--device",
            "cpu",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "no space left on the device" in err and "needs " in err and "bytes are free there" in err
    assert str(root) in err
    survivor = PhotoIndex.open(root)
    assert survivor.manifest == before.manifest and generation_files(root) == files  # nothing half-written left
    assert Searcher(model, survivor).image(assets.photos[3], k=1)[0].id == 3
    # with room again, the same add goes through
    (small_disk.path / "filler").unlink()
    report = add_to_index(model, root, assets.photos, cache_dir=assets.cache_dir, progress=False)
    assert report.index.count == len(assets.photos)


def test_a_compressed_add_on_a_full_disk_keeps_the_previous_generation(small_disk):
    """The compressed structure's vectors file is appended to in place (raw writes, not a temp file): a full disk
    there too leaves the index as it was."""
    from polyvse.index import PhotoEntry, write_compressed_index
    from polyvse.index.chunked import append_compressed
    from polyvse.index.store import index_lock

    rng = np.random.default_rng(0)
    x = rng.standard_normal((1500, 64)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    root = small_disk.path / "index"
    info = {"fingerprint": "sha256:0", "similarity": "cosine"}
    with index_lock(root):
        write_compressed_index(
            root,
            info,
            [PhotoEntry(i, f"{i}.jpg", f"/p/{i}.jpg") for i in range(1000)],
            iter([x[:1000]]),
            dim=64,
            exact_threshold=20_000,
            recall_target=0.9,
            requested="ivfpq",
        )
    before = PhotoIndex.open(root)
    small_disk.fill(16384)
    with pytest.raises(DiskFullError, match="no space left on the device") as err:
        with index_lock(root):
            append_compressed(
                root,
                before,
                [PhotoEntry(1000 + i, f"n{i}", f"/p/n{i}") for i in range(500)],
                x[1000:],
                info,
                "ivfpq",
                None,
            )
    assert str(root) in str(err.value) and "previous generation stays in force" in str(err.value)
    survivor = PhotoIndex.open(root)
    assert survivor.count == 1000 and survivor.manifest == before.manifest
    np.testing.assert_array_equal(survivor.search(x[:5], 1)[1][:, 0], np.arange(5))


def test_a_checkpoint_save_on_a_full_disk_keeps_the_old_checkpoint(assets, small_disk):  # noqa: F811
    from polyvse.model.checkpoint import load_checkpoint, save_checkpoint, save_training_state

    ckpt = load_checkpoint(assets.checkpoint)
    path = save_checkpoint(ckpt, small_disk.path / "checkpoint")
    old = {p.name: p.read_bytes() for p in path.iterdir()}
    with torch.no_grad():
        for param in ckpt.model.parameters():
            param.add_(1.0)
    small_disk.fill(16384)
    needed = sum(v.numel() * v.element_size() for v in ckpt.model.state_dict().values())
    with pytest.raises(DiskFullError) as err:
        save_checkpoint(ckpt, path)
    message = str(err.value)
    assert message.startswith(f"{path}: no space left on the device: writing it needs ")
    assert int(message.split("needs ")[1].split(" bytes")[0].replace(",", "")) >= needed
    assert "the checkpoint that was there is untouched" in message
    assert {p.name: p.read_bytes() for p in path.iterdir()} == old
    assert sorted(os.listdir(small_disk.path)) == ["checkpoint", "filler"]  # no temporary folder left
    polyvse.load(path)  # still loads
    # the trainer's resumable state: the same, through the atomic writes every writer uses
    state = small_disk.path / "state.pt"
    (small_disk.path / "filler").unlink()
    save_training_state({"epoch": 1}, state)
    small_disk.fill(8192)
    with pytest.raises(DiskFullError, match="state.pt: no space left on the device") as err:
        save_training_state({"epoch": 2, "weights": torch.zeros(1 << 16)}, state)
    assert "needs more than the " in str(err.value) and "bytes it wrote before the disk filled" in str(err.value)
    assert torch.load(state, weights_only=False) == {"epoch": 1}
    assert json.dumps(sorted(os.listdir(small_disk.path))) == json.dumps(["checkpoint", "filler", "state.pt"])
