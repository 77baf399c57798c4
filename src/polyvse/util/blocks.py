"""Rows of a vectors file read a chunk at a time under a memory budget (the index's builds and its CSLS penalty
table): plain reads of a memory map's file, so its pages are not mapped into this process."""

from __future__ import annotations

import mmap

import numpy as np

CHUNK_SHARE = 8  # a chunk being added or scanned, with FAISS's copies of it: at most 1/8 of the budget


def mapped_file(vectors: np.ndarray) -> tuple[str, int] | None:
    """(path, byte offset of row 0) of a memory map opened on a file (``open_rows``), None for anything else
    (an array in memory, or a slice of a map)."""
    if isinstance(vectors, np.memmap) and isinstance(vectors.base, mmap.mmap) and vectors.filename:
        return vectors.filename, int(vectors.offset)
    return None


def read_block(vectors: np.ndarray, start: int, stop: int) -> np.ndarray:
    """Rows ``start:stop`` as a float32 array: read from the file of a memory map (its pages are not mapped into
    this process), sliced from an array."""
    where = mapped_file(vectors)
    if where is None:
        return np.ascontiguousarray(vectors[start:stop], dtype=np.float32)
    dim = vectors.shape[1]
    out = np.fromfile(where[0], dtype=np.float32, count=(stop - start) * dim, offset=where[1] + start * dim * 4)
    return out.reshape(stop - start, dim)
