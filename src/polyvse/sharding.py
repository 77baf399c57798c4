"""Which slice of a photo list shard k of n handles: deterministic, contiguous, covering the list exactly.

Every process that works on one shard computes its slice from the same sorted photo list, so no process
has to tell another what to do. Sizes differ by at most one, the larger slices first (as numpy's
``array_split`` and ``polyvse_train.distributed.shard`` cut a training batch); the process group of a torchrun
launch is ``polyvse.distributed``.
"""

from __future__ import annotations

import re

from .errors import DataError

__all__ = ["parse_shard_spec", "shard_bounds"]

_SPEC = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


def shard_bounds(total: int, shard: int, num_shards: int) -> tuple[int, int]:
    """``(start, stop)``: the rows ``start <= row < stop`` of a ``total``-row list that shard ``shard`` handles."""
    if num_shards < 1 or not 0 <= shard < num_shards:
        raise ValueError(f"shard {shard} of {num_shards} does not exist (shards are numbered 0..{num_shards - 1})")
    base, extra = divmod(int(total), int(num_shards))
    start = shard * base + min(shard, extra)
    return start, start + base + (1 if shard < extra else 0)


def parse_shard_spec(spec: str) -> tuple[int, int]:
    """``"K/N"`` -> ``(K, N)``; a DataError that says what is expected otherwise."""
    m = _SPEC.match(spec or "")
    if not m:
        raise DataError(f"--shard {spec!r}: expected K/N, e.g. 0/4 for the first of four shards")
    shard, num_shards = int(m.group(1)), int(m.group(2))
    if num_shards < 1 or shard >= num_shards:
        raise DataError(f"--shard {spec}: K must be between 0 and N-1 (shards of N are numbered 0..N-1)")
    return shard, num_shards
