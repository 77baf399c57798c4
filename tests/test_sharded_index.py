"""Sharded `features extract` / `index build` (torchrun ranks or --shard K/N jobs) and `index merge`: a 2-rank
build equals a 1-rank build, the merge refuses missing or foreign shards naming the file, and a rerun after a
killed rank computes only the missing shard.

The model is untrained (the index does not care what the weights are); the photos are real Flickr8K photos
plus one broken file, which sorts last and so lands in the last shard.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from polyvse.distributed import DistInfo
from polyvse.errors import DataError
from polyvse.index import PhotoIndex
from polyvse.sharding import parse_shard_spec, shard_bounds
from polyvse_app.cli import main as cli_main
from polyvse_tooling.harness import free_port
from polyvse_train.distributed import shard

N_PHOTOS = 7  # odd: the two shards differ in size
TIMING_FIELDS = ("created", "updated")


def torchrun(args: list[str], nproc: int = 2) -> str:
    """Run `polyvse ARGS` under torchrun on CPU (gloo); its stdout."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
    }
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        str(nproc),
        "--master-addr",
        "127.0.0.1",
        "--master-port",
        str(free_port()),
        "-m",
        "polyvse_app.cli",
        *args,
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def polyvse(args: list[str], capsys) -> tuple[int, str, str]:
    code = cli_main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def make_checkpoint(path: Path, seed: int, csls: bool = False) -> Path:
    """A random word-level model; with ``csls``, ranking by CSLS against random banks (k 3)."""
    from polyvse.csls.banks import HubnessBanks
    from polyvse.features.backbones import get_extractor
    from polyvse.model.checkpoint import Checkpoint, save_checkpoint
    from polyvse.modules import JointEmbeddingModel, ModelConfig
    from polyvse.modules.text_input import CaptionEncoder

    extractor = get_extractor()
    torch.manual_seed(seed)
    enc = CaptionEncoder.build({"en": ["a dog runs in the snow"]})
    model = JointEmbeddingModel(
        ModelConfig(vocab_size=len(enc.vocab), image_dim=extractor.dim, embed_dim=16, word_dim=8, hidden_dim=16)
    )
    rng = np.random.default_rng(seed)
    banks = HubnessBanks(rng.normal(size=(20, 16)), {"en": rng.normal(size=(25, 16))}, k=3) if csls else None
    return save_checkpoint(
        Checkpoint(
            model=model.eval(),
            captions=enc,
            backbone=extractor.name,
            feature_key=extractor.key,
            ten_crop=False,
            languages=["en"],
            hubness=banks,
        ),
        path,
    )


@pytest.fixture(scope="module")
def setup(shared_data, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sharded")
    photos = tmp / "photos"
    photos.mkdir()
    for src in sorted((shared_data / "flickr8k" / "images").glob("*.jpg"))[:N_PHOTOS]:
        shutil.copyfile(src, photos / src.name)
    (photos / "zz_broken.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    ckpt = make_checkpoint(tmp / "ckpt", seed=0)
    other = make_checkpoint(tmp / "other-ckpt", seed=1)
    return dict(tmp=tmp, photos=photos, ckpt=ckpt, other=other)


def build_args(
    setup, out: Path, cache: Path, *extra: str, images: Path | None = None, checkpoint: Path | None = None
) -> list[str]:
    return [
        "index",
        "build",
        "--checkpoint",
        str(checkpoint or setup["ckpt"]),
        "--images",
        str(images or setup["photos"]),
        "--out",
        str(out),
        "--cache-dir",
        str(cache),
        "--workers",
        "0",
        "--quiet",
        *extra,
    ]


@pytest.fixture(scope="module")
def one_rank_index(setup) -> Path:
    out = setup["tmp"] / "one-rank"
    assert cli_main(build_args(setup, out, setup["tmp"] / "cache-one")) == 0
    return out


def assert_same_index(a: Path, b: Path) -> None:
    ia, ib = PhotoIndex.open(a), PhotoIndex.open(b)
    assert [p.to_dict() for p in ib.photos] == [p.to_dict() for p in ia.photos]
    np.testing.assert_allclose(np.asarray(ib.vectors), np.asarray(ia.vectors), rtol=1e-5, atol=1e-6)

    def comparable(manifest: dict) -> dict:
        m = {k: v for k, v in manifest.items() if k not in TIMING_FIELDS}
        # file names, modification times and digests differ by generation and write time; sizes do not
        m["files"] = {
            k: v for k, v in m["files"].items() if k not in ("vectors", "photos", "ann", "mtime_ns", "sha256")
        }
        return m

    assert comparable(ib.manifest) == comparable(ia.manifest)
    assert not (b / ".shards").exists()


# -- slicing ----------------------------------------------------------------------------------------------
def test_shard_bounds_tile_the_list_like_training_batches():
    for total in (0, 1, 7, 10):
        for n in (1, 2, 3, 4):
            bounds = [shard_bounds(total, k, n) for k in range(n)]
            assert bounds[0][0] == 0 and bounds[-1][1] == total
            assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
            assert [list(range(*b)) for b in bounds] == [
                shard(np.arange(total), DistInfo(k, n)).tolist() for k in range(n)
            ]
    assert parse_shard_spec(" 1/4 ") == (1, 4)
    for bad in ("4/4", "1", "a/b", "-1/2", "0/0"):
        with pytest.raises(DataError, match="--shard"):
            parse_shard_spec(bad)


# -- torchrun ---------------------------------------------------------------------------------------------
def test_two_rank_build_equals_one_rank_build(setup, one_rank_index):
    out = setup["tmp"] / "two-rank"
    stdout = torchrun(build_args(setup, out, setup["tmp"] / "cache-two"))
    assert "2 shards merged" in stdout
    assert f"{N_PHOTOS} photos indexed, 1 unreadable ({N_PHOTOS} features computed" in stdout
    assert "zz_broken.jpg" in stdout
    assert_same_index(one_rank_index, out)


def test_killed_rank_rerun_computes_only_the_missing_shard(setup, one_rank_index, capsys):
    out, cache = setup["tmp"] / "resumed", setup["tmp"] / "cache-resumed"
    # rank 0 finished its shard, rank 1 was killed while writing its own (a stray temporary file)
    code, stdout, _ = polyvse(build_args(setup, out, setup["tmp"] / "cache-rank0", "--shard", "0/2"), capsys)
    assert code == 0 and "shard 0/2: 4 of 4 photos embedded" in stdout
    (out / ".shards" / ".shard-00001-of-00002.npz.abc123.tmp").write_bytes(b"PK\x03\x04 half a zip")
    stdout = torchrun(build_args(setup, out, cache))
    assert "2 shards merged (1 kept from an earlier run)" in stdout
    # only shard 1's photos went through the backbone: 3 photos + the broken one (which fails)
    assert f"{N_PHOTOS} photos indexed, 1 unreadable (3 features computed, 0 from the cache" in stdout
    assert len(list(cache.rglob("*.npy"))) == 3
    assert_same_index(one_rank_index, out)


# -- independent jobs + `polyvse index merge` ------------------------------------------------------------
def test_merge_refuses_missing_and_foreign_shards_then_merges(setup, one_rank_index, capsys):
    out, cache = setup["tmp"] / "jobs", setup["tmp"] / "cache-one"
    shards = out / ".shards"
    code, _, err = polyvse(["index", "merge", "--out", str(out)], capsys)
    assert code == 2 and "no shard files" in err

    assert polyvse(build_args(setup, out, cache, "--shard", "0/2"), capsys)[0] == 0
    code, _, err = polyvse(["index", "merge", "--out", str(out)], capsys)
    assert code == 2 and "shard-00001-of-00002.npz: missing (1 of 2 shards missing" in err
    assert "--shard 1/2" in err

    # shard 1 embedded by another model
    other = build_args(setup, out, cache, "--shard", "1/2")
    other[other.index("--checkpoint") + 1] = str(setup["other"])
    assert polyvse(other, capsys)[0] == 0
    code, _, err = polyvse(["index", "merge", "--out", str(out)], capsys)
    assert code == 2 and "shard-00001-of-00002.npz: embedded by another model" in err

    # shard 1 of another photo list (one photo fewer)
    fewer = setup["tmp"] / "fewer"
    shutil.copytree(setup["photos"], fewer)
    sorted(fewer.glob("*.jpg"))[0].unlink()
    assert polyvse(build_args(setup, out, cache, "--shard", "1/2", images=fewer), capsys)[0] == 0
    code, _, err = polyvse(["index", "merge", "--out", str(out)], capsys)
    assert code == 2 and "shard-00001-of-00002.npz: written for another photo list" in err

    # a shard of a 3-shard build lying beside them
    assert polyvse(build_args(setup, out, cache, "--shard", "2/3"), capsys)[0] == 0
    code, _, err = polyvse(["index", "merge", "--out", str(out)], capsys)
    assert code == 2 and "different shard counts (2, 3)" in err
    (shards / "shard-00002-of-00003.npz").unlink()

    # a damaged shard file
    good = shards / "shard-00000-of-00002.npz"
    saved = good.read_bytes()
    good.write_bytes(saved[: len(saved) // 2])
    code, _, err = polyvse(["index", "merge", "--out", str(out)], capsys)
    assert code == 2 and "shard-00000-of-00002.npz: unreadable shard file" in err
    good.write_bytes(saved)

    # the right shard 1 replaces the foreign one (it is not mistaken for a finished shard) and the merge succeeds
    code, stdout, _ = polyvse(build_args(setup, out, cache, "--shard", "1/2"), capsys)
    assert code == 0 and "shard 1/2: 3 of 4 photos embedded (1 unreadable;" in stdout
    assert "kept from an earlier run" not in stdout
    code, stdout, _ = polyvse(["index", "merge", "--out", str(out)], capsys)
    assert code == 0 and f"{N_PHOTOS} photos merged into the index, 1 unreadable" in stdout
    assert_same_index(one_rank_index, out)
    code, _, err = polyvse(["index", "merge", "--out", str(out)], capsys)
    assert code == 2 and "no shard files" in err


def test_a_shard_is_kept_only_while_its_photos_are_unchanged(setup, tmp_path, capsys):
    photos = tmp_path / "photos"
    shutil.copytree(setup["photos"], photos)
    args = build_args(setup, tmp_path / "index", setup["tmp"] / "cache-one", "--shard", "0/2", images=photos)
    assert "kept from an earlier run" not in polyvse(args, capsys)[1]
    assert "kept from an earlier run" in polyvse(args, capsys)[1]
    first = sorted(photos.glob("*.jpg"))[0]
    os.utime(first, ns=(first.stat().st_atime_ns, first.stat().st_mtime_ns + 10**9))  # edited
    assert "kept from an earlier run" not in polyvse(args, capsys)[1]


def test_features_extract_shards_fill_one_cache(setup, tmp_path, capsys):
    whole, sharded = tmp_path / "whole", tmp_path / "sharded"
    args = ["features", "extract", "--images", str(setup["photos"]), "--workers", "0", "--quiet"]
    code, stdout, _ = polyvse([*args, "--cache-dir", str(whole)], capsys)
    assert code == 0 and f"{N_PHOTOS + 1} photos: {N_PHOTOS} extracted" in stdout
    code, stdout, _ = polyvse([*args, "--cache-dir", str(sharded), "--shard", "1/2"], capsys)
    assert code == 0 and "shard 1/2 (photos 5-8 of 8): 4 photos: 3 extracted, 0 already cached, 1 failed" in stdout
    code, stdout, _ = polyvse([*args, "--cache-dir", str(sharded), "--shard", "0/2"], capsys)
    assert code == 0 and "shard 0/2 (photos 1-4 of 8): 4 photos: 4 extracted" in stdout
    files = sorted(p.relative_to(whole) for p in whole.rglob("*.npy"))
    assert files == sorted(p.relative_to(sharded) for p in sharded.rglob("*.npy")) and len(files) == N_PHOTOS
    for f in files:
        np.testing.assert_array_equal(np.load(sharded / f), np.load(whole / f))


def test_shard_flag_is_refused_under_torchrun(setup, monkeypatch, capsys):
    monkeypatch.setenv("WORLD_SIZE", "2")
    code, _, err = polyvse(build_args(setup, setup["tmp"] / "x", setup["tmp"] / "c", "--shard", "0/2"), capsys)
    assert code == 2 and "under torchrun every rank already takes its own shard" in err


def test_the_merge_of_a_csls_checkpoints_shards_stores_the_photo_penalties_one_build_stores(setup, capsys):
    """Each photo's CSLS penalty (polyvse.csls.penalties): the merge reads the banks of the checkpoint the shards
    recorded and stores the table a single-process build stores."""
    ckpt = make_checkpoint(setup["tmp"] / "csls-ckpt", seed=2, csls=True)
    cache = setup["tmp"] / "cache-csls"
    one, jobs = setup["tmp"] / "csls-one", setup["tmp"] / "csls-jobs"
    assert polyvse(build_args(setup, one, cache, checkpoint=ckpt), capsys)[0] == 0
    for k in (0, 1):
        assert polyvse(build_args(setup, jobs, cache, "--shard", f"{k}/2", checkpoint=ckpt), capsys)[0] == 0
    assert polyvse(["index", "merge", "--out", str(jobs)], capsys)[0] == 0
    a, b = PhotoIndex.open(one), PhotoIndex.open(jobs)
    assert a.penalties.shape == (N_PHOTOS, 2) and b.penalties.shape == (N_PHOTOS, 2)
    np.testing.assert_allclose(b.penalties, a.penalties, atol=1e-6)
    assert {k: v for k, v in b.manifest["csls"].items() if k != "seconds"} == {
        k: v for k, v in a.manifest["csls"].items() if k != "seconds"
    }
    some = setup["tmp"] / "csls-jobs-en"  # --csls-penalty-langs en: the shards record it, the merge stores that column
    for k in (0, 1):
        assert (
            polyvse(
                build_args(setup, some, cache, "--shard", f"{k}/2", "--csls-penalty-langs", "EN", checkpoint=ckpt),
                capsys,
            )[0]
            == 0
        )
    assert polyvse(["index", "merge", "--out", str(some)], capsys)[0] == 0
    c = PhotoIndex.open(some)
    assert c.manifest["csls"]["keys"] == ["en"] and c.penalties.shape == (N_PHOTOS, 1)
    np.testing.assert_allclose(c.penalties[:, 0], a.penalties[:, 0], atol=1e-6)


def test_no_csls_penalties_builds_adds_and_merges_without_the_table_and_searches_alike(setup, capsys):
    """`--no-csls-penalties` (a very large build's opt-out): no penalties file, the manifest's csls section says they
    were skipped, `index add` keeps the choice unless told otherwise, a sharded merge skips them too, and every
    search ranks and scores as the default build's (it computes r_C per query)."""
    from polyvse import load
    from polyvse.index import Searcher

    ckpt = make_checkpoint(setup["tmp"] / "skip-ckpt", seed=3, csls=True)
    cache = setup["tmp"] / "cache-skip"
    stored, skipped, jobs = (setup["tmp"] / name for name in ("skip-stored", "skip-skipped", "skip-jobs"))
    listing = setup["tmp"] / "skip-first.txt"
    listing.write_text("\n".join(str(p) for p in sorted(setup["photos"].glob("*.jpg"))[:4]) + "\n")
    assert polyvse(build_args(setup, stored, cache, checkpoint=ckpt), capsys)[0] == 0
    first = build_args(setup, skipped, cache, "--no-csls-penalties", checkpoint=ckpt)
    first[first.index("--images") : first.index("--images") + 2] = ["--list", str(listing)]
    code, out, _ = polyvse(first, capsys)
    assert code == 0 and "CSLS penalties skipped" in out
    add = [
        "index",
        "add",
        "--index",
        str(skipped),
        "--images",
        str(setup["photos"]),
        "--cache-dir",
        str(cache),
        "--workers",
        "0",
        "--quiet",
    ]
    assert polyvse(add, capsys)[0] == 0  # the rest of the photos, the index's choice kept
    for k in (0, 1):
        assert (
            polyvse(
                build_args(setup, jobs, cache, "--shard", f"{k}/2", "--no-csls-penalties", checkpoint=ckpt), capsys
            )[0]
            == 0
        )
    assert polyvse(["index", "merge", "--out", str(jobs)], capsys)[0] == 0
    assert PhotoIndex.open(stored).penalties.shape == (N_PHOTOS, 2)
    model = load(ckpt, device="cpu")
    want = Searcher(model, PhotoIndex.open(stored)).text("a dog runs in the snow", "en", k=N_PHOTOS).hits
    for root in (skipped, jobs):
        index = PhotoIndex.open(root)
        assert index.count == N_PHOTOS and index.penalties is None and not list(root.glob("penalties.*"))
        assert index.manifest["csls"] == {"skipped": True} and "penalties" not in index.manifest["files"]
        assert polyvse(["index", "info", "--index", str(root)], capsys)[1].count("photo penalties skipped") == 1
        got = Searcher(model, index).text("a dog runs in the snow", "en", k=N_PHOTOS).hits
        assert [h.path for h in got] == [h.path for h in want]
        np.testing.assert_allclose([h.score for h in got], [h.score for h in want], atol=1e-5)
    extra = setup["tmp"] / "skip-extra"  # a new photo (another path), added with the table asked for
    extra.mkdir()
    shutil.copyfile(sorted(setup["photos"].glob("*.jpg"))[0], extra / "extra.jpg")
    add[add.index("--images") + 1] = str(extra)
    assert polyvse([*add, "--csls-penalties"], capsys)[0] == 0
    grown = PhotoIndex.open(skipped)
    assert grown.penalties.shape == (N_PHOTOS + 1, 2) and grown.manifest["csls"]["keys"] == ["en", "*"]
