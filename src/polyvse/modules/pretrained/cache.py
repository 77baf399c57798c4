"""Content-keyed on-disk cache of frozen sentence embeddings, so heads can be trained on the frozen
vectors of ~500k captions without ever computing one twice.

    from polyvse.modules.pretrained import encode_cached, get_pretrained_encoder
    X = encode_cached(get_pretrained_encoder("e5-small"), captions, "de", "runs/cache/text")

Key of an entry: ``sha256(cache_id \\x1f lang \\x1f text)`` (UTF-8), where the encoder's ``cache_id`` names
the encoder, its backend package version and every option that changes the vectors (e5's prefix).
A new package version or option is a miss, never a stale hit.

Layout (one folder per encoder configuration, so an old one can be deleted whole)::

    <cache_dir>/<slug of cache_id>-<sha256(cache_id)[:10]>/meta.json   what produced the vectors
    <cache_dir>/<...>/shards/<c>.npz     keys uint8 (n, 32) | vecs float32 (n, dim)

``c`` is the SHA-256 (first 40 hex digits) of the shard's dim, keys and vectors. A shard is written
to a temporary ``.tmp-*`` name in the same folder, fsynced and renamed into place, so a killed
process leaves at worst a ``.tmp-*`` file, which is never read. A shard that is unreadable anyway
(truncated, damaged, wrong shapes, bytes that do not hash to its name - e.g. after a crash on a
file system without ordered metadata, or a copy cut short) is skipped with a warning and its
entries are computed again: no corrupt vector is ever returned. Any number of processes may add
to one cache at once (shard names never collide; a duplicate entry is harmless).

The index (all keys, sorted by their first 8 bytes, ~40 bytes per entry) is built in memory from
the shards' key arrays when the cache is opened; vectors are read shard by shard on lookup.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ...util.atomic import atomic_open
from ...util.progress import Progress

if TYPE_CHECKING:  # pragma: no cover
    from .base import PretrainedSentenceEncoder

__all__ = [
    "SENTENCE_CACHE",
    "SentenceEmbeddingCache",
    "encode_cached",
    "fill_cache",
    "sentence_cache_dir",
    "text_digests",
]

log = logging.getLogger(__name__)

DEFAULT_SHARD_SIZE = 4096  # texts per shard: a killed run loses at most this much work
_SEP = "\x1f"
_SHARD_RE = re.compile(r"^[0-9a-f]{40}\.npz$")
#: the folder of the sentence cache that training, evaluation and `polyvse adapt` share, under the cache root
SENTENCE_CACHE = "sentences"


def sentence_cache_dir(data_root: str | os.PathLike | None = None) -> Path:
    """The shared sentence cache: ``<cache root>/sentences`` (``polyvse.util.paths.cache_root``)."""
    from ...util.paths import cache_root

    return cache_root(data_root) / SENTENCE_CACHE


def text_digests(cache_id: str, lang: str, texts: Iterable[str]) -> np.ndarray:
    """uint8 (n, 32): sha256 of ``cache_id \\x1f lang \\x1f text`` for each text."""
    prefix = hashlib.sha256()
    prefix.update(f"{cache_id}{_SEP}{lang}{_SEP}".encode())
    rows = []
    for t in texts:
        h = prefix.copy()
        h.update(t.encode("utf-8", "surrogatepass"))
        rows.append(h.digest())
    if not rows:
        return np.zeros((0, 32), dtype=np.uint8)
    return np.frombuffer(b"".join(rows), dtype=np.uint8).reshape(len(rows), 32).copy()


def _shard_checksum(dim: int, keys: np.ndarray, vecs: np.ndarray) -> str:
    h = hashlib.sha256()
    h.update(int(dim).to_bytes(4, "little"))
    h.update(np.ascontiguousarray(keys, dtype=np.uint8).tobytes())
    h.update(np.ascontiguousarray(vecs, dtype="<f4").tobytes())
    return h.hexdigest()[:40]


def _prefix64(keys: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(keys[:, :8]).view(np.uint64).reshape(-1)


def _atomic_write_bytes_via(path: Path, write) -> None:
    with atomic_open(path, "wb", prefix=".tmp-", suffix=".part") as fh:
        write(fh)


class SentenceEmbeddingCache:
    """The cached embeddings of one encoder configuration (``cache_id``, ``dim``) under ``cache_dir``."""

    def __init__(self, cache_dir: str | os.PathLike, cache_id: str, dim: int):
        if not cache_id:
            raise ValueError("cache_id must be a non-empty string")
        if int(dim) < 1:
            raise ValueError(f"dim must be positive, got {dim}")
        self.root = Path(cache_dir).expanduser()
        self.cache_id = cache_id
        self.dim = int(dim)
        slug = re.sub(r"[^A-Za-z0-9._=-]+", "_", cache_id).strip("._")[:80]
        self.dir = self.root / f"{slug}-{hashlib.sha256(cache_id.encode()).hexdigest()[:10]}"
        self.shard_dir = self.dir / "shards"
        self._lock = threading.RLock()
        self._shards: dict[str, np.ndarray] = {}  # shard file name -> its keys (n, 32)
        self._bad: set[str] = set()  # shard names found unreadable: never read again by this object
        self._index: tuple | None = None  # (keys, prefix64, shard, row, shard names), sorted by prefix64
        self.hits = 0  # lookups answered from disk (unique texts)
        self.misses = 0
        self.refresh()

    @classmethod
    def for_encoder(cls, cache_dir: str | os.PathLike, encoder: PretrainedSentenceEncoder) -> SentenceEmbeddingCache:
        return cls(cache_dir, encoder.cache_id, encoder.dim)

    def __repr__(self) -> str:
        return f"SentenceEmbeddingCache({str(self.dir)!r}, entries={len(self)}, shards={len(self._shards)})"

    def __len__(self) -> int:
        """Entries on disk (a duplicate written by two runs counts twice)."""
        return sum(len(k) for k in self._shards.values())

    # -- index ---------------------------------------------------------------------------------
    def refresh(self) -> None:
        """Pick up shards written since the last scan (by this or another process)."""
        with self._lock:
            try:
                names = sorted(p.name for p in self.shard_dir.iterdir() if _SHARD_RE.match(p.name))
            except FileNotFoundError:
                names = []
            added = False
            for name in names:
                if name in self._shards or name in self._bad:
                    continue
                keys = self._read_keys(name)
                if keys is None:
                    self._bad.add(name)
                else:
                    self._shards[name] = keys
                    added = True
            if added:
                self._index = None

    def _read_keys(self, name: str) -> np.ndarray | None:
        path = self.shard_dir / name
        try:
            with np.load(path, allow_pickle=False) as z:
                keys = z["keys"]
        except Exception as exc:  # noqa: BLE001 - truncated/damaged by something outside us: recompute
            log.warning(
                "ignoring unreadable embedding cache shard %s (%s: %s); its entries will be recomputed",
                path,
                type(exc).__name__,
                exc,
            )
            return None
        if keys.dtype != np.uint8 or keys.ndim != 2 or keys.shape[1] != 32:
            log.warning("ignoring embedding cache shard %s: keys have shape %s %s", path, keys.shape, keys.dtype)
            return None
        return keys

    def _read_vecs(self, name: str):
        """The shard's payload (here: its vectors), verified against its name; None (and the shard dropped) if bad."""
        path = self.shard_dir / name
        keys = self._shards[name]
        try:
            with np.load(path, allow_pickle=False) as z:
                payload, reason = self._verify(z, keys, name)
        except Exception as exc:  # noqa: BLE001
            payload, reason = None, f"{type(exc).__name__}: {exc}"
        if reason is not None:
            log.warning("ignoring damaged embedding cache shard %s (%s); its entries will be recomputed", path, reason)
            with self._lock:
                self._shards.pop(name, None)
                self._bad.add(name)
                self._index = None
            return None
        return payload

    # -- what a shard holds besides its keys (a subclass may store something else: .e5.states_cache) ----------
    #: meta.json's description of a shard
    LAYOUT = "shards/<sha256(dim|keys|vecs)[:40]>.npz with keys uint8 (n,32), vecs float32 (n,dim)"

    def _verify(self, z, keys: np.ndarray, name: str):
        """(payload, None) from an open shard whose keys are ``keys``, or (None, why it is damaged)."""
        vecs = z["vecs"]
        if vecs.dtype != np.float32 or vecs.shape != (len(keys), self.dim):
            return None, f"vectors have shape {vecs.shape} {vecs.dtype}, expected ({len(keys)}, {self.dim}) float32"
        if not np.array_equal(z["keys"], keys) or _shard_checksum(self.dim, keys, vecs) != name[:40]:
            return None, "contents do not match the checksum in its name"
        return vecs, None

    def _empty(self, n: int):
        """The lookup result for ``n`` entries before any is found."""
        return np.zeros((n, self.dim), dtype=np.float32)

    def _copy(self, out, dest: np.ndarray, payload, src: np.ndarray) -> None:
        out[dest] = payload[src]

    def _get_index(self):
        with self._lock:
            if self._index is None:
                names = list(self._shards)
                if names:
                    keys = np.concatenate([self._shards[n] for n in names])
                    shard_of = np.concatenate(
                        [np.full(len(self._shards[n]), i, dtype=np.int32) for i, n in enumerate(names)]
                    )
                    row_of = np.concatenate([np.arange(len(self._shards[n]), dtype=np.int32) for n in names])
                else:
                    keys = np.zeros((0, 32), np.uint8)
                    shard_of = row_of = np.zeros(0, np.int32)
                k64 = _prefix64(keys)
                order = np.argsort(k64, kind="stable")
                self._index = (keys[order], k64[order], shard_of[order], row_of[order], names)
            return self._index

    # -- lookups and writes -------------------------------------------------------------------
    def digests(self, texts: Sequence[str], lang: str) -> np.ndarray:
        return text_digests(self.cache_id, lang, texts)

    def lookup(self, digests: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(vectors float32 (n, dim), found bool (n,)) for uint8 (n, 32) digests; rows not found are 0."""
        digests = np.asarray(digests, dtype=np.uint8).reshape(-1, 32)
        n = len(digests)
        out = self._empty(n)
        found = np.zeros(n, dtype=bool)
        for _attempt in range(3):  # a shard found damaged while reading is dropped: look again
            todo = np.flatnonzero(~found)
            if len(todo) == 0:
                break
            keys, k64, shard_of, row_of, names = self._get_index()
            if len(keys) == 0:
                break
            q = digests[todo]
            pos = np.minimum(np.searchsorted(k64, _prefix64(q)), len(keys) - 1)
            hit = (keys[pos] == q).all(axis=1)
            if not hit.any():
                break
            hit_rows, hit_pos = todo[hit], pos[hit]
            damaged = False
            for s in np.unique(shard_of[hit_pos]):
                sel = shard_of[hit_pos] == s
                payload = self._read_vecs(names[s])
                if payload is None:
                    damaged = True
                    continue
                self._copy(out, hit_rows[sel], payload, row_of[hit_pos[sel]])
                found[hit_rows[sel]] = True
            if not damaged:
                break
        return out, found

    def put(self, digests: np.ndarray, vecs: np.ndarray) -> Path | None:
        """Write one shard (atomically) holding these entries; returns its path (None if empty)."""
        keys = np.ascontiguousarray(np.asarray(digests, dtype=np.uint8).reshape(-1, 32))
        vecs = np.ascontiguousarray(np.asarray(vecs, dtype=np.float32))
        if vecs.shape != (len(keys), self.dim):
            raise ValueError(f"vectors have shape {vecs.shape}, expected ({len(keys)}, {self.dim})")
        if not np.isfinite(vecs).all():
            raise ValueError("refusing to cache non-finite embeddings")
        if len(keys) == 0:
            return None
        return self._put_shard(keys, _shard_checksum(self.dim, keys, vecs), vecs=vecs)

    def _put_shard(self, keys: np.ndarray, checksum: str, **arrays: np.ndarray) -> Path:
        """Write one shard named by ``checksum`` holding ``keys`` and ``arrays``, atomically."""
        self._write_meta()
        name = checksum + ".npz"
        path = self.shard_dir / name
        # Always (re)write: a file already at this name may be the damaged copy we are replacing.
        _atomic_write_bytes_via(path, lambda fh: np.savez(fh, keys=keys, **arrays))
        with self._lock:
            self._bad.discard(name)
            self._shards[name] = keys
            self._index = None
        return path

    def _write_meta(self) -> None:
        meta_path = self.dir / "meta.json"
        if meta_path.is_file():
            return
        meta = {
            "cache_id": self.cache_id,
            "dim": self.dim,
            "key": "sha256(cache_id + '\\x1f' + lang + '\\x1f' + text), UTF-8",
            "layout": self.LAYOUT,
        }
        data = (json.dumps(meta, indent=2) + "\n").encode()
        _atomic_write_bytes_via(meta_path, lambda fh: fh.write(data))

    def get_many(self, texts: Sequence[str], lang: str) -> tuple[np.ndarray, np.ndarray]:
        """(vectors, found) for texts in ``lang``; see :meth:`lookup`."""
        return self.lookup(self.digests(texts, lang))

    def put_many(self, texts: Sequence[str], lang: str, vecs: np.ndarray) -> Path | None:
        return self.put(self.digests(texts, lang), vecs)


def encode_cached(
    encoder: PretrainedSentenceEncoder,
    texts: Sequence[str],
    lang: str,
    cache_dir: str | os.PathLike | SentenceEmbeddingCache,
    progress: bool = True,
    *,
    batch_size: int | None = None,
    shard_size: int = DEFAULT_SHARD_SIZE,
    unlisted: bool = False,
) -> np.ndarray:
    """Embeddings of ``texts`` (language ``lang``) by ``encoder``: float32 (len(texts), dim), rows in
    input order, computing only what the cache lacks (each distinct text once) and writing it to the
    cache in shards of ``shard_size`` texts as it goes, so an interrupted run resumes where it stopped.
    ``progress`` shows a bar over the texts to compute (on a terminal) and one line when they are done.
    ``unlisted``: a language the encoder reads without having trained on it (``check_language``)."""
    lang = encoder.check_language(lang, unlisted=unlisted)
    if isinstance(texts, (str, bytes)):
        raise TypeError("encode_cached expects a sequence of strings, not a single string")
    texts = list(texts)
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"encode_cached: texts[{i}] is {type(t).__name__}, not str")
    if shard_size < 1:
        raise ValueError(f"shard_size must be at least 1, got {shard_size}")
    if isinstance(cache_dir, SentenceEmbeddingCache):
        cache = cache_dir
        if cache.cache_id != encoder.cache_id or cache.dim != encoder.dim:
            raise ValueError(
                f"cache is for {cache.cache_id!r} (dim {cache.dim}), "
                f"not encoder {encoder.cache_id!r} (dim {encoder.dim})"
            )
        cache.refresh()
    else:
        cache = SentenceEmbeddingCache.for_encoder(cache_dir, encoder)
    if not texts:
        return np.zeros((0, encoder.dim), dtype=np.float32)

    uvecs, inverse = fill_cache(
        cache,
        cache.digests(texts, lang),
        texts,
        lambda batch, bar: encoder.encode(batch, lang, batch_size, on_batch=bar.update, unlisted=unlisted),
        shard_size=shard_size,
        desc=f"{encoder.name} [{lang}]",
        progress=progress,
    )
    return uvecs[inverse]


def fill_cache(
    cache: SentenceEmbeddingCache,
    digests: np.ndarray,
    texts: Sequence[str],
    compute,
    *,
    shard_size: int,
    desc: str,
    progress: bool,
):
    """(values of the distinct digests, inverse: each text's row among them): what ``cache`` has, and what it
    lacks computed by ``compute(texts, progress bar)`` (each distinct text once) and written to ``cache`` in shards
    of ``shard_size`` texts as it goes, so an interrupted run resumes where it stopped."""
    _, first, inverse = np.unique(
        digests.view(np.dtype((np.void, 32))).reshape(-1), return_index=True, return_inverse=True
    )
    udigests = digests[first]
    uvals, found = cache.lookup(udigests)
    missing = np.flatnonzero(~found)
    cache.hits += int(found.sum())
    cache.misses += len(missing)
    log.info(
        "%s: %d texts, %d distinct, %d cached, %d to compute",
        desc,
        len(texts),
        len(first),
        int(found.sum()),
        len(missing),
    )
    if len(missing):
        with Progress(total=len(missing), desc=desc, unit="sentence", enabled=progress, dynamic_ncols=True) as bar:
            for start in range(0, len(missing), shard_size):
                idx = missing[start : start + shard_size]
                vals = compute([texts[first[i]] for i in idx], bar)
                cache.put(udigests[idx], vals)
                for j, i in enumerate(idx):
                    uvals[i] = vals[j]
    return uvals, inverse.reshape(-1)
