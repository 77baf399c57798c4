"""A read-only string -> int table answering ``get`` like a dict without building one: what makes a tokenizer's
vocabulary of 250k pieces cheap to open in a fresh process (USE's saved state, :mod:`.use_state`; e5's pieces,
:mod:`polyvse.model.numpy_serving.e5`)."""

from __future__ import annotations

import bisect
import zlib

import numpy as np

__all__ = ["PrefixTable"]


class PrefixTable:
    """A tokenizer's table {string: int}, read-only, answering ``get(key)`` (all a tokenizer asks of it) like the
    dict: the keys' UTF-8 bytes in one blob, their CRC-32s sorted, a look-up a binary search plus a byte comparison.
    One query asks a few hundred keys: building the dict of 250k strings would cost far more. (USE's table maps
    every prefix of a piece to its id + 1, or 0 for a prefix only; e5's maps each piece to its id.) Keys are encoded
    with ``surrogatepass``, so a piece that is not valid UTF-8 (read with ``surrogateescape``) is a key too."""

    NAMES = ("prefix_blob", "prefix_offsets", "prefix_crcs", "prefix_order", "prefix_values")

    def __init__(self, blob: np.ndarray, offsets: np.ndarray, crcs: np.ndarray, order: np.ndarray, values: np.ndarray):
        # memoryviews of the arrays as given (memory-mapped ones too): indexing one gives a Python int as fast as
        # an array.array does, and wrapping costs nothing, where converting a large table costs a query's start-up
        def view(a: np.ndarray, dtype) -> memoryview:
            return memoryview(np.ascontiguousarray(a, dtype=dtype))

        self._blob = view(blob, np.uint8)
        self._offsets, self._order, self._values = (view(a, np.int64) for a in (offsets, order, values))
        self._crcs = view(crcs, np.uint64)

    @classmethod
    def arrays(cls, table: dict[str, int]) -> dict[str, np.ndarray]:
        """What ``__init__`` takes, from the tokenizer's own dict."""
        keys = [k.encode("utf-8", "surrogatepass") for k in table]
        crcs = np.fromiter((zlib.crc32(k) for k in keys), dtype=np.uint64, count=len(keys))
        order = np.argsort(crcs, kind="stable")
        offsets = np.concatenate([[0], np.cumsum([len(k) for k in keys], dtype=np.int64)])
        return dict(
            zip(
                cls.NAMES,
                (
                    np.frombuffer(b"".join(keys), dtype=np.uint8),
                    offsets,
                    crcs[order],
                    order,
                    np.fromiter(table.values(), dtype=np.int64, count=len(keys)),
                ),
            )
        )

    def get(self, key: str, default=None):
        raw = key.encode("utf-8", "surrogatepass")
        crc = zlib.crc32(raw)
        at = bisect.bisect_left(self._crcs, crc)
        while at < len(self._crcs) and self._crcs[at] == crc:
            j = self._order[at]
            if self._blob[self._offsets[j] : self._offsets[j + 1]] == raw:
                return self._values[j]
            at += 1
        return default

    def __len__(self) -> int:
        return len(self._values)
