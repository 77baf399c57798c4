"""Content-addressed feature cache + batch extraction over many photo files.

Layout (one small ``.npy`` per photo and configuration, so millions of photos only cost files, and
any number of runs can add to it)::

    <cache_dir>/<extractor.cache_key>/meta.json          what produced these vectors
    <cache_dir>/<extractor.cache_key>/<h[:2]>/<h>.npy     float32 (dim,) for the photo whose bytes hash to h
    <cache_dir>/onnx/                                     graphs ONNX Runtime runs (polyvse.features.cut_onnx)

``h`` is the SHA-256 of the photo file's bytes, so a renamed or moved photo is still a hit and an
edited one is a miss. Every file is written to a temporary name in the same directory and moved
into place with :func:`os.replace`, so a run that is killed leaves only complete vectors behind
(plus at worst a stray ``.tmp-*`` file) and the next run picks up where it stopped.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

from ..device import pin_memory
from ..errors import DataError
from ..util.atomic import atomic_open
from ..util.progress import Progress
from .concat import ConcatExtractor
from .extractor import FeatureExtractor
from .images import DEFAULT_MAX_PIXELS, load_image, read_image_bytes

__all__ = ["FeatureCache", "FeatureResult", "extract_features", "file_sha256"]

log = logging.getLogger(__name__)

#: the folder under the cache's root where a runtime other than torch keeps its exported graphs
GRAPH_DIR = "onnx"
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_SAFE_KEY = re.compile(r"^[A-Za-z0-9._-]+$")


def file_sha256(path: str | os.PathLike) -> str:
    """Hex SHA-256 of a file's bytes (read in chunks); DataError naming the file if unreadable."""
    try:
        with open(path, "rb") as fh:
            return hashlib.file_digest(fh, "sha256").hexdigest()
    except OSError:
        read_image_bytes(path)  # raises the DataError describing why the file cannot be read
        raise


def _atomic_write(path: Path, write) -> None:
    """Write via ``write(fileobj)`` to a ``.tmp-*`` file next to ``path``, then rename over it. No fsync:
    a cache entry lost in a crash is simply recomputed, and millions of small fsyncs would dominate."""
    with atomic_open(path, "wb", prefix=".tmp-", suffix=path.suffix, fsync=False) as fh:
        write(fh)


class FeatureCache:
    """Directory of cached feature vectors, keyed by (extractor key, sha256 of the photo bytes)."""

    def __init__(self, cache_dir: str | os.PathLike):
        self.root = Path(cache_dir).expanduser()

    def __repr__(self) -> str:
        return f"FeatureCache({str(self.root)!r})"

    def key_dir(self, key: str) -> Path:
        if not _SAFE_KEY.match(key) or key in (".", ".."):
            raise ValueError(f"extractor key {key!r} is not a safe directory name")
        return self.root / key

    def path(self, key: str, digest: str) -> Path:
        if not _HEX64.match(digest):
            raise ValueError(f"not a sha256 hex digest: {digest!r}")
        return self.key_dir(key) / digest[:2] / f"{digest}.npy"

    def get(self, key: str, digest: str, dim: int | None = None) -> np.ndarray | None:
        """The cached vector, or None on a miss (an unreadable or mis-shaped entry counts as a miss)."""
        p = self.path(key, digest)
        try:
            vec = np.load(p, allow_pickle=False)
        except FileNotFoundError:
            return None
        except Exception as exc:  # noqa: BLE001 - damaged by something outside polyvse: recompute
            log.warning("ignoring unreadable cached feature %s (%s); it will be recomputed", p, exc)
            return None
        if vec.dtype != np.float32 or vec.ndim != 1 or (dim is not None and vec.shape[0] != dim):
            log.warning("ignoring cached feature %s with shape %s %s; it will be recomputed", p, vec.shape, vec.dtype)
            return None
        return vec

    def has(self, key: str, digest: str) -> bool:
        return self.path(key, digest).is_file()

    def put(self, key: str, digest: str, vector: np.ndarray) -> Path:
        vec = np.ascontiguousarray(vector, dtype=np.float32).reshape(-1)
        p = self.path(key, digest)
        _atomic_write(p, lambda fh: np.save(fh, vec, allow_pickle=False))
        return p

    def write_meta(self, extractor: FeatureExtractor) -> None:
        """Record (once) what produced the vectors under this key, for humans and tools."""
        meta_path = self.key_dir(extractor.cache_key) / "meta.json"
        if meta_path.is_file():
            return
        meta = {
            "key": extractor.key,
            "runtime": extractor.runtime,
            "backbone": extractor.name,
            "weights": extractor.weights_tag,
            "dim": extractor.dim,
            "ten_crop": extractor.ten_crop,
            "preprocess": extractor.preprocess.describe(),
            "layout": "<h[:2]>/<h>.npy, h = sha256 of the photo file bytes, float32 (dim,)",
        }
        data = (json.dumps(meta, indent=2) + "\n").encode()
        _atomic_write(meta_path, lambda fh: fh.write(data))


@dataclass
class FeatureResult:
    """Features for the photos that could be read, in input order, plus what failed and why."""

    features: np.ndarray  # float32 (n_ok, dim)
    paths: list  # the ok inputs, in input order
    index: np.ndarray  # int64 (n_ok,): position of each ok row in the input list
    failures: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    cached: int = 0  # ok rows found in the cache
    extracted: int = 0  # ok rows computed by this run
    key: str = ""

    def __len__(self) -> int:
        return len(self.paths)


class _PhotoDataset(Dataset):
    """(row, path, expected digest) -> (row, digest, tensor or None, error or None); runs in workers."""

    def __init__(self, items: list[tuple[int, str, str]], preprocess, max_pixels: int | None):
        self.items = items
        self.preprocess = preprocess
        self.max_pixels = max_pixels

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int):
        row, path, digest = self.items[i]
        try:
            data = read_image_bytes(path)
            actual = hashlib.sha256(data).hexdigest()  # the file may have changed since it was hashed
            img = load_image(data, self.max_pixels, name=path)
            return row, actual, self.preprocess(img), None
        except DataError as exc:
            return row, digest, None, exc.reason
        except Exception as exc:  # noqa: BLE001 - never let one photo kill the loader
            return row, digest, None, f"{type(exc).__name__}: {exc}"


def _collate(batch):
    ok = [(row, digest, x) for row, digest, x, err in batch if err is None]
    bad = [(row, err) for row, _, _, err in batch if err is not None]
    x = torch.stack([t for _, _, t in ok]) if ok else None
    return [r for r, _, _ in ok], [d for _, d, _ in ok], x, bad


def extract_features(
    paths: Sequence[str | os.PathLike],
    extractor: FeatureExtractor,
    cache_dir: str | os.PathLike | FeatureCache,
    *,
    strict: bool = False,
    batch_size: int = 32,
    num_workers: int = 0,
    progress: bool = True,
    max_pixels: int | None = DEFAULT_MAX_PIXELS,
) -> FeatureResult:
    """Features for every readable photo in ``paths``, computing only what the cache lacks.

    Unreadable photos (missing, empty, not an image, corrupt, truncated, too many pixels) are
    logged as warnings, listed in ``failures`` and skipped; with ``strict=True`` the first one
    raises :class:`DataError` instead. Decoding and preprocessing run in a torch DataLoader with
    ``num_workers`` worker processes (0 = in this process); each finished batch is written to the
    cache straight away, so an interrupted run loses at most one batch of work.

    Decoding a typical photo costs ~10% of what the network does and the network already uses every
    core, so on CPU workers pay off only when decoding is slow (large photos, slow disks) or with many cores:
    on 2 cores EfficientNet-Lite0 ran at ~37 photos/s with 0 or 2 workers alike. On a GPU decoding is the
    bound: ``polyvse.device.loader_workers`` sizes the workers to the machine, and batches are pinned.
    """
    cache = cache_dir if isinstance(cache_dir, FeatureCache) else FeatureCache(cache_dir)
    if isinstance(extractor, ConcatExtractor):
        return _concat_results(
            paths,
            [
                extract_features(
                    paths,
                    part,
                    cache,
                    strict=strict,
                    batch_size=batch_size,
                    num_workers=num_workers,
                    progress=progress,
                    max_pixels=max_pixels,
                )
                for part in extractor.parts
            ],
            extractor.key,
        )
    extractor.keep_graphs_in(cache.root / GRAPH_DIR)  # before any key is read: it may choose the runtime
    rows = _Rows(paths, extractor.dim, strict)
    todo, from_cache = _take_cached(rows, cache, extractor, progress)
    _compute_missing(
        rows,
        todo,
        cache,
        extractor,
        batch_size=batch_size,
        num_workers=num_workers,
        max_pixels=max_pixels,
        progress=progress,
    )
    return rows.result(from_cache, extractor.key)


class _Rows:
    """The result being filled: one feature row per path (failed rows dropped at the end), and why rows failed."""

    def __init__(self, paths: Sequence, dim: int, strict: bool):
        self.paths = paths
        self.strict = strict
        self.out = np.zeros((len(paths), dim), dtype=np.float32)
        self.done = np.zeros(len(paths), dtype=bool)
        self.errors: dict[int, str] = {}

    def fail(self, row: int, reason: str) -> None:
        if self.strict:
            raise DataError(reason, str(self.paths[row]))
        self.errors[row] = reason
        log.warning("skipping photo %s: %s", self.paths[row], reason)

    def fill(self, rows, vec) -> None:
        self.out[rows] = vec
        self.done[rows] = True

    def result(self, from_cache: int, key: str) -> FeatureResult:
        ok = np.flatnonzero(self.done).astype(np.int64)
        return FeatureResult(
            features=self.out if len(ok) == len(self.paths) else self.out[ok],
            paths=[self.paths[int(i)] for i in ok],
            index=ok,
            failures=[(str(self.paths[i]), self.errors[i]) for i in sorted(self.errors)],
            cached=from_cache,
            extracted=int(len(ok)) - from_cache,
            key=key,
        )


def _take_cached(
    rows: _Rows, cache: FeatureCache, extractor: FeatureExtractor, progress: bool
) -> tuple[dict[str, list[int]], int]:
    """Pass 1 (this process): hash every file, take what the cache already has.

    Returns ({digest: rows with those bytes} still to compute (duplicates computed once), rows from the cache).
    """
    paths, n = rows.paths, len(rows.paths)
    todo: dict[str, list[int]] = {}
    from_cache = 0
    with Progress(total=n, desc="checking feature cache", unit="photo", enabled=progress and n > 0) as bar:
        for row, p in enumerate(paths):
            bar.update(1)
            try:
                digest = file_sha256(p)
            except DataError as exc:
                rows.fail(row, exc.reason)
                continue
            if digest in todo:
                todo[digest].append(row)
                continue
            vec = cache.get(extractor.cache_key, digest, extractor.dim)
            if vec is None and extractor.preprocess.squash and _is_square(p):  # squash is a no-op on a square photo
                vec = cache.get(extractor.cache_square_key, digest, extractor.dim)
            if vec is not None:
                rows.fill(row, vec)
                from_cache += 1
            else:
                todo[digest] = [row]
        bar.close(f"{n:,} photos, {from_cache:,} in the cache")
    return todo, from_cache


def _is_square(path) -> bool:
    """Whether a photo file is square, from its header alone; False when it cannot be read (pass 2 says why)."""
    try:
        with Image.open(path) as img:
            return img.width == img.height
    except Exception:  # noqa: BLE001 - unreadable files are reported by the extraction pass
        return False


def _compute_missing(
    rows: _Rows,
    todo: dict[str, list[int]],
    cache: FeatureCache,
    extractor: FeatureExtractor,
    *,
    batch_size: int,
    num_workers: int,
    max_pixels: int | None,
    progress: bool,
) -> None:
    """Pass 2: decode + preprocess in the DataLoader, run the backbone, write each vector to the cache."""
    items = [(same[0], str(rows.paths[same[0]]), digest) for digest, same in todo.items()]
    if not items:
        return
    cache.write_meta(extractor)
    rows_of = {same[0]: same for same in todo.values()}
    loader = DataLoader(
        _PhotoDataset(items, extractor.preprocess, max_pixels),
        batch_size=max(1, int(batch_size)),
        shuffle=False,
        num_workers=max(0, int(num_workers)),
        collate_fn=_collate,
        pin_memory=pin_memory(extractor.device),  # GPU: the copy to the device overlaps decoding
    )
    with Progress(
        total=len(items), desc=f"extracting {extractor.name} features", unit="photo", enabled=progress
    ) as bar:
        for firsts, digests, x, bad in loader:
            for row, reason in bad:
                for r in rows_of[row]:
                    rows.fail(r, reason)
            if x is not None:
                feats = extractor.forward_batch(x).numpy().astype(np.float32, copy=False)
                for row, digest, vec in zip(firsts, digests, feats):
                    cache.put(extractor.cache_key, digest, vec)
                    rows.fill(rows_of[row], vec)
            bar.update(len(firsts) + len(bad))


def _concat_results(paths: Sequence, results: list[FeatureResult], key: str) -> FeatureResult:
    """The rows every part could read, each part's vector side by side (a photo one part failed on is dropped)."""
    ok = results[0].index
    for r in results[1:]:
        ok = np.intersect1d(ok, r.index)
    rows = [np.searchsorted(r.index, ok) for r in results]
    failures = sorted({f for r in results for f in r.failures})
    return FeatureResult(
        features=np.concatenate([r.features[i] for r, i in zip(results, rows)], axis=1),
        paths=[paths[int(i)] for i in ok],
        index=ok.astype(np.int64),
        failures=failures,
        cached=min(r.cached for r in results),
        extracted=max(r.extracted for r in results),
        key=key,
    )
