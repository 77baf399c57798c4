"""Batches of rows of about one length, for encoders that pad each batch to its longest row."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np


def in_length_batches(
    lengths: Sequence[int] | None, n: int, batch_size: int, encode: Callable[[np.ndarray], np.ndarray]
) -> np.ndarray | None:
    """float32 ``(n, d)``: ``encode(row indices)`` (an ``(len, d)`` array) over batches of at most ``batch_size``
    rows, shortest first where ``lengths`` are given (else in order), put back in the rows' order. None for no rows."""
    order = np.argsort(lengths, kind="stable") if lengths is not None else np.arange(n)
    out = None
    for i in range(0, n, batch_size):
        take = order[i : i + batch_size]
        v = encode(take)
        if out is None:
            out = np.empty((n, v.shape[1]), dtype=np.float32)
        out[take] = v
    return out
