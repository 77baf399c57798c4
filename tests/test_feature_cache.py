"""extract_features + FeatureCache: bad photos skipped and named, content-keyed cache, no repeated work,
interrupted runs keep what they finished."""

from __future__ import annotations

import hashlib
import json
import logging
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import png_bytes
from polyvse.errors import DataError
from polyvse.features.backbones import get_extractor
from polyvse.features.cache import FeatureCache, extract_features
from polyvse.features.images import load_image


@pytest.fixture(scope="module")
def lite():
    return get_extractor("efficientnet-lite0")


@pytest.fixture(scope="module")
def originals(shared_data) -> list[Path]:
    return sorted((shared_data / "flickr8k" / "images").glob("*.jpg"))[:4]


@pytest.fixture
def good(originals, tmp_path) -> list[Path]:
    """Copies of 4 real photos (tests rename and edit them)."""
    d = tmp_path / "photos"
    d.mkdir()
    return [Path(shutil.copy(p, d / p.name)) for p in originals]


@pytest.fixture(scope="module")
def bad_contents(originals) -> dict[str, bytes]:
    data = originals[0].read_bytes()
    rng = random.Random(0)
    return {
        "random.jpg": bytes(rng.getrandbits(8) for _ in range(4000)),
        "truncated.jpg": data[: len(data) // 2],
        "empty.jpg": b"",
        "notes.jpg": b"this is a text file, not a photo\n",
        "bomb.png": png_bytes(20000, 20000),  # 400 megapixels in ~50 KB
    }


@pytest.fixture
def bad(bad_contents, tmp_path) -> dict[str, Path]:
    d = tmp_path / "bad"
    d.mkdir()
    out = {}
    for name, blob in bad_contents.items():
        (d / name).write_bytes(blob)
        out[name] = d / name
    out["missing.jpg"] = d / "missing.jpg"
    return out


@pytest.fixture
def calls(lite, monkeypatch) -> dict:
    """Counts what reaches the backbone."""
    counter = {"passes": 0, "crops": 0}
    real = lite._pooled

    def spy(x):
        counter["passes"] += 1
        counter["crops"] += int(x.shape[0])
        return real(x)

    monkeypatch.setattr(lite, "_pooled", spy)
    return counter


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def npy_files(cache: Path) -> list[Path]:
    """The cache's entries: not a write in progress (a ``.tmp-*`` file, which a kill may leave behind)."""
    return sorted(p for p in cache.rglob("*.npy") if not p.name.startswith(".tmp-"))


def test_mixed_run_keeps_good_photos_and_names_bad_ones(lite, good, bad, tmp_path, caplog, calls):
    paths = [
        good[0],
        bad["random.jpg"],
        good[1],
        bad["truncated.jpg"],
        bad["empty.jpg"],
        bad["missing.jpg"],
        good[2],
        bad["notes.jpg"],
        bad["bomb.png"],
        good[3],
    ]
    cache = tmp_path / "cache"
    with caplog.at_level(logging.WARNING, logger="polyvse.features.cache"):
        r = extract_features(paths, lite, cache, batch_size=3, progress=False)

    assert r.features.dtype == np.float32 and r.features.shape == (4, 1280)
    assert r.paths == good and r.index.tolist() == [0, 2, 6, 9]
    assert r.extracted == 4 and r.cached == 0 and r.key == lite.key and len(r) == 4
    reasons = dict(r.failures)
    assert [p for p, _ in r.failures] == [str(p) for p in paths if p not in good]  # input order
    assert "not an image" in reasons[str(bad["random.jpg"])]
    assert "truncated" in reasons[str(bad["truncated.jpg"])]
    assert "empty" in reasons[str(bad["empty.jpg"])]
    assert "not found" in reasons[str(bad["missing.jpg"])]
    assert "text file" in reasons[str(bad["notes.jpg"])]
    assert "decompression bomb" in reasons[str(bad["bomb.png"])]
    logged = caplog.text
    for p in bad.values():
        assert str(p) in logged

    assert calls["crops"] == 4
    want = lite.extract([load_image(p) for p in good])
    np.testing.assert_allclose(r.features, want, rtol=1e-5, atol=1e-5)

    # layout: <cache>/<key>/<h[:2]>/<h>.npy, nothing cached for bad photos, no temp files left
    for p, row in zip(good, r.features):
        h = sha(p)
        f = cache / lite.key / h[:2] / f"{h}.npy"
        np.testing.assert_array_equal(np.load(f), row)
    assert len(npy_files(cache)) == 4
    assert not [p for p in cache.rglob("*") if p.name.startswith(".tmp")]
    meta = json.loads((cache / lite.key / "meta.json").read_text())
    assert meta["dim"] == 1280 and meta["backbone"] == "efficientnet-lite0" and meta["ten_crop"] is False


def test_rerun_calls_the_backbone_zero_times(lite, good, tmp_path, calls):
    first = extract_features(good, lite, tmp_path / "cache", progress=False)
    assert calls["crops"] == 4
    calls.update(passes=0, crops=0)
    again = extract_features(good, lite, tmp_path / "cache", progress=False)
    assert calls == {"passes": 0, "crops": 0}
    assert again.cached == 4 and again.extracted == 0
    np.testing.assert_array_equal(again.features, first.features)
    assert again.paths == first.paths and again.index.tolist() == first.index.tolist()


def test_cache_is_keyed_by_content_not_name(lite, good, tmp_path, calls):
    cache = tmp_path / "cache"
    first = extract_features(good[:2], lite, cache, progress=False)
    calls.update(crops=0)

    renamed = good[0].with_name("renamed.jpg")
    good[0].rename(renamed)
    r = extract_features([renamed, good[1]], lite, cache, progress=False)
    assert calls["crops"] == 0 and r.cached == 2
    np.testing.assert_array_equal(r.features, first.features)

    with open(good[1], "ab") as fh:  # still a valid JPEG (bytes after the end marker), new content
        fh.write(b"\x00edited")
    r = extract_features([renamed, good[1]], lite, cache, progress=False)
    assert calls["crops"] == 1 and r.cached == 1 and r.extracted == 1
    assert len(npy_files(cache)) == 3


def test_identical_photos_in_one_run_are_computed_once(lite, good, tmp_path, calls):
    twin = good[0].with_name("twin.jpg")
    shutil.copy(good[0], twin)
    r = extract_features([good[0], good[1], twin], lite, tmp_path / "cache", progress=False)
    assert calls["crops"] == 2 and r.features.shape == (3, 1280) and r.extracted == 3
    np.testing.assert_array_equal(r.features[0], r.features[2])


def test_ten_crop_has_its_own_key_and_entries(lite, good, tmp_path, calls):
    cache = tmp_path / "cache"
    single = extract_features(good[:1], lite, cache, progress=False)
    lite10 = get_extractor("efficientnet-lite0", ten_crop=True)
    ten = extract_features(good[:1], lite10, cache, progress=False)
    assert ten.extracted == 1 and ten.cached == 0 and ten.features.shape == (1, 1280)
    assert ten.key != single.key and (cache / lite10.key).is_dir() and (cache / lite.key).is_dir()
    assert not np.allclose(ten.features, single.features)
    assert calls["crops"] == 1  # the spy sits on the single-crop extractor only
    again = extract_features(good[:1], lite10, cache, progress=False)
    assert again.cached == 1 and again.extracted == 0
    np.testing.assert_array_equal(again.features, ten.features)


def test_strict_stops_at_the_first_bad_photo(lite, good, bad, tmp_path):
    with pytest.raises(DataError) as info:
        extract_features([good[0], bad["truncated.jpg"], good[1]], lite, tmp_path / "c1", strict=True, progress=False)
    assert info.value.path == str(bad["truncated.jpg"]) and "truncated" in str(info.value)
    with pytest.raises(DataError, match="not found"):
        extract_features([good[0], bad["missing.jpg"]], lite, tmp_path / "c2", strict=True, progress=False)


def test_interrupted_run_keeps_finished_batches(lite, good, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    real = lite.forward_batch
    seen = {"batches": 0}

    def dies_on_second_batch(x):
        seen["batches"] += 1
        if seen["batches"] == 2:
            raise KeyboardInterrupt
        return real(x)

    monkeypatch.setattr(lite, "forward_batch", dies_on_second_batch)
    with pytest.raises(KeyboardInterrupt):
        extract_features(good, lite, cache, batch_size=2, progress=False)
    monkeypatch.setattr(lite, "forward_batch", real)

    assert len(npy_files(cache)) == 2
    assert not [p for p in cache.rglob("*") if p.name.startswith(".tmp")]
    r = extract_features(good, lite, cache, batch_size=2, progress=False)
    assert r.cached == 2 and r.extracted == 2


def test_killed_process_leaves_only_complete_entries(good, tmp_path):
    """SIGKILL a real extraction midway: every file left is a complete vector; the rerun finishes the rest."""
    cache = tmp_path / "cache"
    script = textwrap.dedent(f"""
        import sys, time
        from polyvse.features import extract_features, get_extractor
        ext = get_extractor()
        real = ext.forward_batch
        def slow(x):
            out = real(x)
            time.sleep(0.3)
            return out
        ext.forward_batch = slow
        paths = {[str(p) for p in good]!r}
        extract_features(paths, ext, {str(cache)!r}, batch_size=1, progress=False)
        print("finished", flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while len(npy_files(cache)) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
    finally:
        out, err = proc.communicate(timeout=60)
    assert b"finished" not in out, "the extraction ended before it could be killed"
    done = npy_files(cache)
    assert 2 <= len(done) < 4, err.decode()[-2000:]
    assert len(list(cache.rglob(".tmp-*"))) <= 1  # at worst the one write the kill interrupted
    for f in done:
        vec = np.load(f)
        assert vec.shape == (1280,) and vec.dtype == np.float32
    lite = get_extractor()
    r = extract_features(good, lite, cache, progress=False)
    assert r.cached == len(done) and r.extracted == 4 - len(done)


def test_failed_write_leaves_no_partial_file(lite, good, tmp_path, monkeypatch):
    cache = FeatureCache(tmp_path / "cache")
    h = sha(good[0])

    def half_write_then_fail(fh, arr, allow_pickle=False):
        fh.write(b"\x93NUMPY partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "save", half_write_then_fail)
    from polyvse.util.atomic import DiskFullError

    with pytest.raises(DiskFullError, match="no space left"):
        cache.put(lite.key, h, np.ones(1280, dtype=np.float32))
    monkeypatch.undo()
    assert not cache.path(lite.key, h).exists()
    assert [p for p in (tmp_path / "cache").rglob("*") if p.is_file()] == []


def test_damaged_cache_entry_is_recomputed(lite, good, tmp_path, caplog, calls):
    cache = tmp_path / "cache"
    first = extract_features(good[:1], lite, cache, progress=False)
    entry = npy_files(cache)[0]
    entry.write_bytes(b"garbage")
    calls.update(crops=0)
    with caplog.at_level(logging.WARNING, logger="polyvse.features.cache"):
        r = extract_features(good[:1], lite, cache, progress=False)
    assert calls["crops"] == 1 and r.extracted == 1 and "unreadable cached feature" in caplog.text
    np.testing.assert_array_equal(r.features, first.features)
    np.testing.assert_array_equal(np.load(entry), first.features[0])


def test_worker_processes_give_the_same_result(lite, good, bad, tmp_path):
    paths = [good[0], bad["truncated.jpg"], good[1], good[2]]
    r0 = extract_features(paths, lite, tmp_path / "c0", num_workers=0, batch_size=2, progress=False)
    r2 = extract_features(paths, lite, tmp_path / "c2", num_workers=2, batch_size=2, progress=False)
    np.testing.assert_array_equal(r2.features, r0.features)
    assert r2.index.tolist() == r0.index.tolist() == [0, 2, 3]
    assert r2.failures == r0.failures and "truncated" in r2.failures[0][1]


def test_empty_input(lite, tmp_path):
    r = extract_features([], lite, tmp_path / "cache", progress=False)
    assert r.features.shape == (0, 1280) and r.paths == [] and r.index.tolist() == [] and r.failures == []


def test_feature_cache_roundtrip_and_validation(tmp_path):
    cache = FeatureCache(tmp_path)
    h = "ab" * 32
    assert cache.get("k1", h) is None and not cache.has("k1", h)
    vec = np.arange(8, dtype=np.float32)
    path = cache.put("k1", h, vec)
    assert path == tmp_path / "k1" / "ab" / f"{h}.npy" and cache.has("k1", h)
    np.testing.assert_array_equal(cache.get("k1", h), vec)
    assert cache.get("k1", h, dim=16) is None  # wrong size counts as a miss
    with pytest.raises(ValueError):
        cache.path("k1", "not-a-digest")
    with pytest.raises(ValueError):
        cache.path("../escape", h)


def test_concatenated_backbones_join_their_parts_caches(lite, good, bad, tmp_path):
    """``a+b``: each photo's vectors from both parts side by side, read from (and written to) each part's own cache;
    a photo a part cannot read is dropped from the pair, and the API's extract() gives the same numbers."""
    pair = get_extractor("efficientnet-lite0+efficientnet-lite1")
    assert pair.dim == 2560 and pair.name == "efficientnet-lite0+efficientnet-lite1"
    cache = tmp_path / "cache"
    alone = extract_features(good[:2], lite, cache, progress=False)  # lite0's cache already holds two photos
    paths = good + [bad["empty.jpg"]]
    both = extract_features(paths, pair, cache, progress=False)
    assert both.features.shape == (len(good), 2560) and list(both.index) == list(range(len(good)))
    assert [p for p, _ in both.failures] == [str(bad["empty.jpg"])]
    np.testing.assert_array_equal(both.features[:2, :1280], alone.features)
    lite1 = extract_features(good, get_extractor("efficientnet-lite1"), cache, progress=False)
    assert lite1.extracted == 0  # the pair filled lite1's own cache
    np.testing.assert_array_equal(both.features[:, 1280:], lite1.features)
    direct = pair.extract([load_image(p) for p in good[:2]])
    np.testing.assert_allclose(direct, both.features[:2], atol=1e-4)
    assert not (cache / pair.key).exists()  # no second copy on disk
