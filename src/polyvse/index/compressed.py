"""The compressed index: collections larger than memory (``ivfpq``, chosen by ``--max-memory``).

    RAM    an IVF index whose lists hold 4-bit product-quantisation codes (FAISS ``IVF<nlist>,PQ<m>x4fs``, the
           SIMD "fast-scan" layout): dim/8 bytes per photo by default (128 bytes for 1024-d), instead of dim*4
    disk   ``vectors.<g>.f32``: every full float32 vector, raw rows, memory-mapped, never read whole

A query scans the ``nprobe`` nearest lists' codes for its ``depth`` best candidates (``depth`` per 10 results
asked), then re-ranks them exactly: their full vectors are read from the memory-mapped file (the kernel is asked
for all of them at once, ``MADV_WILLNEED``, so a cold cache costs one round of parallel reads, not ``depth``
sequential ones) and scored by inner product. nprobe and depth are tuned at build time to the recall target
(``polyvse.index.ann.tune_compressed``), against exact search by a chunked scan of the file. A caller that keeps
fewer results than it asks for (CSLS: 10 of 110) gets the candidates the depth gives for those it keeps, plus a
tenth more picked by approximate score minus its prior (half each photo's stored r_C): those CSLS may lift from deep
in the list (``rerank_search``'s ``tuned_for`` and ``prior``).

Why this structure (measured on 100,000 1024-d vectors drawn around the product model's real photo embeddings;
benchmarks/README.md, "Scale", has the table): with re-ranking of 50 candidates, 4-bit codes of dim/8 bytes
reach the recall of IVF-Flat itself at every nprobe (the coarse lists, not the codes, bound the recall), and scan
about 10x faster than IVF-Flat and 3x faster than 8-bit PQ of the same size. OPQ rotates the input so that PQ
codes lose less; it would only help where the codes bound the recall, and re-ranking already removes that.

Built in chunks, within the memory budget: the lists are trained on a sample (``IVF_TRAIN_PER_LIST`` rows per list,
no more than a quarter of the budget) and filled ``chunk_rows`` rows at a time (at most ``CHUNK_ROWS``, a block and
FAISS's copies of it within an eighth of the budget), and the tuning's exact scan reads the same chunks. Every read
of a build (the sample, the chunks, the tuning's candidates) is a plain file read (``read_block``, ``read_file_rows``),
never through the memory map: the kernel maps up to 16 neighbouring pages on each fault of a mapping, so a sample of
one row in sixteen, like a scan, left the whole file resident in the building process (22.2 GiB at 10M under an 8 GB
budget, benchmarks/results/latest.json; 3.8 of 5.0 GiB at 1M under 800 MB, the rest mostly the tuning's scan of
65,536 rows at a time against 512 probes: benchmarks/results/scale_build_memory.json); read, the pages stay in the
page cache, which the kernel reclaims as it needs. Searching a served index still reads its candidates through the
map (``read_rows``). Appending adds the new rows' codes (and re-trains, in chunks again, once the index holds
``IVF_RETRAIN_GROWTH`` times what it was trained on); the vectors file is extended in place under the new
generation's name (a hard link: only the new rows are written; a copy where the file system has no hard links).
"""

from __future__ import annotations

import math
import mmap
import os
import re
from pathlib import Path

import numpy as np

from ..errors import DataError
from ..util.blocks import CHUNK_SHARE, mapped_file, read_block

CHUNK_ROWS = 65_536
MIN_CHUNK_ROWS = 1024
TRAIN_SHARE = 4  # the training sample: at most 1/4 of the budget (FAISS's working copies about as much again)
# code sizes tried under a memory budget, finest first: dim/4, dim/8, dim/16, dim/32 bytes a photo. The finest
# came in when dim/8 codes missed the recall goal at 10M photos while dim/4 still fit an 8 GB budget
# (benchmarks/README.md)
DIMS_PER_SUB_QUANTIZER = (2, 4, 8, 16)
DEFAULT_DEPTH = 50  # candidates re-ranked per 10 results asked, before tuning
MAX_DEPTH = 800
IVF_TRAIN_PER_LIST = 64
MIN_ROWS = 1000  # fewer are too few to train lists and 4-bit codes on (and their floats take a few MB)
PREFETCH_MIN_BYTES = 256 * 2**20
PHOTO_ENTRY_BYTES = 400  # one photo's entry in memory (name, path, id): what the estimates add per photo
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.I)


# -- memory ---------------------------------------------------------------------------------------------------
def parse_memory(text: str | int | float | None) -> int | None:
    """ "8GB", "8G", "8GiB", "512MB", "2.5g" or a number of bytes -> bytes (powers of 1024), None for None."""
    if text is None or isinstance(text, (int, float)):
        return None if text is None else int(text)
    m = _SIZE.match(str(text))
    if not m:
        raise DataError(f"memory size {text!r}: write it as a number with a unit, e.g. 8GB, 512MB")
    return int(float(m.group(1)) * 1024 ** "bkmgt".index((m.group(2) or "b").lower()))


def sub_quantizers(dim: int, dims_each: int) -> int:
    """Sub-quantizers of a PQ over ``dim`` dims with about ``dims_each`` dims each: an even divisor of dim."""
    m = max(2, dim // dims_each)
    while m > 2 and (dim % m or m % 2):
        m -= 1
    return m if dim % m == 0 else dim


def compressed_lists(n: int) -> int:
    """nlist: ~sqrt(n) (fast-scan makes long lists cheap to scan, and fewer lists cost less to assign), at least
    39 training rows per list (FAISS's k-means minimum)."""
    return max(1, min(int(math.sqrt(n)), n // 39))


def structure_bytes(n: int, dim: int, m: int) -> int:
    """RAM of the compressed structure over n rows: codes (m 4-bit numbers each) + ids + centroids."""
    return n * (m // 2 + 8) + compressed_lists(max(n, 1)) * dim * 4


def flat_bytes(n: int, dim: int) -> int:
    """RAM of an exact or IVF-Flat structure: every vector as float32 (+ IVF's ids)."""
    return n * (dim * 4 + 8)


def choose_sub_quantizers(n: int, dim: int, budget: int | None) -> int:
    """The finest code whose structure, with the photo entries, fits ``budget`` bytes (the finest if no budget);
    a DataError when even the coarsest does not, or when n is too few to train codes on."""
    if n < MIN_ROWS:
        raise DataError(
            f"{n} photos are too few for the compressed structure (it trains its codes on at least "
            f"{MIN_ROWS:,}); use --kind auto or exact" + (", or a larger --max-memory" if budget else "")
        )
    for dims_each in DIMS_PER_SUB_QUANTIZER:
        m = sub_quantizers(dim, dims_each)
        need = structure_bytes(n, dim, m) + n * PHOTO_ENTRY_BYTES
        if budget is None or need <= budget:
            return m
    raise DataError(
        f"{n:,} photos of {dim}-d need at least {need / 2**30:.2f} GiB of memory even compressed "
        f"({m // 2} bytes a photo + {PHOTO_ENTRY_BYTES} for its entry); raise --max-memory"
    )


# -- building -------------------------------------------------------------------------------------------------
def chunk_rows(dim: int, budget: int | None = None) -> int:
    """Rows added (or scanned) at a time: CHUNK_ROWS, fewer where a block of them, FAISS's copy of it (residuals,
    assignments) and the tuning's scores against it (N_PROBES queries x 16 bytes a row) would pass 1/CHUNK_SHARE of
    ``budget``; at least MIN_CHUNK_ROWS."""
    if budget is None:
        return CHUNK_ROWS
    per_row = 3 * dim * 4 + 512 * 16
    return int(min(CHUNK_ROWS, max(MIN_CHUNK_ROWS, budget // CHUNK_SHARE // per_row)))


def train_rows(n: int, dim: int, nlist: int, budget: int | None = None) -> int:
    """Rows the lists and codes are trained on: IVF_TRAIN_PER_LIST a list, fewer where they would pass
    1/TRAIN_SHARE of ``budget`` (never under FAISS's 39 a list), at most n."""
    take = IVF_TRAIN_PER_LIST * nlist
    if budget is not None:
        take = min(take, max(39 * nlist, budget // TRAIN_SHARE // (dim * 4)))
    return int(min(n, take))


def new_structure(vectors: np.ndarray, m: int, seed: int = 0, budget: int | None = None):
    """(trained and filled compressed structure, nlist) over ``vectors`` (an array or a memory map, read in
    chunks that keep to ``budget`` bytes: ``train_rows``, ``chunk_rows``)."""
    import faiss

    n, dim = vectors.shape
    nlist = compressed_lists(n)
    ann = faiss.index_factory(dim, f"IVF{nlist},PQ{m}x4fs", faiss.METRIC_INNER_PRODUCT)
    rng = np.random.default_rng(seed)
    take = train_rows(n, dim, nlist, budget)
    rows = np.arange(n) if take == n else np.sort(rng.choice(n, size=take, replace=False))
    ann.cp.seed = seed
    sample = read_block(vectors, 0, n) if take == n else read_file_rows(vectors, rows)
    ann.train(sample)
    del sample
    add_rows(ann, vectors, 0, chunk_rows(dim, budget))
    return ann, nlist


def add_rows(ann, vectors: np.ndarray, start: int, chunk: int = CHUNK_ROWS) -> None:
    """Add rows ``start:`` of ``vectors`` to ``ann``, ``chunk`` at a time (read from the file, not mapped)."""
    for i in range(start, len(vectors), chunk):
        ann.add(read_block(vectors, i, min(i + chunk, len(vectors))))


def read_file_rows(vectors: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``vectors[rows]`` (rows sorted, distinct) as a float32 array; from a memory map's file by plain reads, one
    per run of adjacent rows, after asking the kernel for all of them at once (``prefetch``): the pages go to the
    page cache, not into this process's resident memory, as faults on the map would (16 pages at a time)."""
    where = mapped_file(vectors)
    if where is None or not len(rows):
        return read_rows(vectors, rows)
    prefetch(vectors, rows)
    dim = vectors.shape[1]
    row_bytes = dim * 4
    out = np.empty((len(rows), dim), dtype=np.float32)
    rows = np.asarray(rows, dtype=np.int64)
    breaks = np.flatnonzero(np.diff(rows) != 1) + 1
    with open(where[0], "rb", buffering=0) as fh:
        fd = fh.fileno()
        for a, b in zip([0, *breaks.tolist()], [*breaks.tolist(), len(rows)]):
            view, offset = memoryview(out[a:b]).cast("B"), where[1] + int(rows[a]) * row_bytes
            while len(view):
                got = os.preadv(fd, [view], offset)
                if got <= 0:
                    raise DataError(f"{where[0]} ends before row {int(rows[b - 1])}; the index is damaged")
                view, offset = view[got:], offset + got
    return out


def gather(vectors: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``vectors[rows]`` for any rows (repeated, unsorted), read as ``read_file_rows`` does."""
    unique, back = np.unique(np.asarray(rows, dtype=np.int64), return_inverse=True)
    return read_file_rows(vectors, unique)[back.reshape(-1)]


def read_rows(vectors: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``vectors[rows]`` as a float32 array; rows of a memory map are asked of the kernel all at once first (the
    search's read: through the map)."""
    prefetch(vectors, rows)
    return np.ascontiguousarray(vectors[rows], dtype=np.float32)


def prefetch(vectors: np.ndarray, rows: np.ndarray) -> None:
    """Ask the kernel to read these rows of a memory-mapped file now (MADV_WILLNEED, one call per run of adjacent
    pages), so that the reads that follow wait for one round of parallel I/O instead of one disk round trip per
    row. A no-op for arrays in memory, and for files under PREFETCH_MIN_BYTES (read quickly, or cached, anyway)."""
    mm = getattr(vectors, "_mmap", None)
    if mm is None or not hasattr(mm, "madvise") or len(rows) < 2 or vectors.nbytes < PREFETCH_MIN_BYTES:
        return
    row_bytes = vectors.shape[1] * vectors.itemsize
    base = getattr(vectors, "offset", 0) % mmap.ALLOCATIONGRANULARITY  # numpy maps from the granule below it
    start = base + np.unique(rows).astype(np.int64) * row_bytes
    first, last = start // mmap.PAGESIZE, (start + row_bytes - 1) // mmap.PAGESIZE
    breaks = np.flatnonzero(first[1:] > last[:-1] + 1) + 1  # a gap of at least one page ends a run
    for a, b in zip(np.concatenate([[0], breaks]).tolist(), np.concatenate([breaks, [len(first)]]).tolist()):
        try:
            mm.madvise(
                mmap.MADV_WILLNEED, int(first[a]) * mmap.PAGESIZE, int(last[b - 1] - first[a] + 1) * mmap.PAGESIZE
            )
        except (OSError, ValueError):
            return


# -- searching ------------------------------------------------------------------------------------------------
# the share of extra candidates a search with a prior reads (rerank_search): it buys CSLS recall at 10M for a tenth
# more rows read (decisions log, "The 10M search with CSLS"); each row is a random disk read on a cold cache
PRIOR_SHARE = 0.1


def candidates_for(k: int, depth: int) -> int:
    """Candidates re-ranked for k results: ``depth`` per 10."""
    return max(k, math.ceil(depth * max(k, 10) / 10))


def rerank_search(
    ann,
    vectors: np.ndarray,
    queries: np.ndarray,
    k: int,
    nprobe: int,
    depth: int,
    read=None,
    tuned_for: int | None = None,
    prior: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Top-k by exact inner product among each query's compressed-search candidates: (scores, ids), best first,
    padded with id -1 where fewer than k were found. ``read(vectors, sorted rows)``: how the candidates' full
    vectors are read (``read_rows``, through the map, by default; the build's tuning reads them unmapped).
    ``tuned_for``: the number of results the caller will keep, when it asks for more to re-rank them itself (CSLS
    asks for 110 to keep 10): the candidates re-ranked are those ``depth`` gives for it (at least k), not for k,
    which would read 11 times as many full vectors from disk for the same top 10.
    ``prior`` (one value per row; with ``tuned_for``): a caller that ranks the k by inner product minus the prior
    (CSLS: half each photo's r_C) may keep one from deep in them; beside the candidates above, a further
    ``PRIOR_SHARE`` of them are read: the best by approximate score minus prior among the rest of the candidates a
    top-k search would re-rank, those it may lift, at a fraction of the reads of re-ranking them all."""
    read = read or read_rows
    import faiss

    want = min(max(k, candidates_for(k if tuned_for is None else min(tuned_for, k), depth)), ann.ntotal)
    lift = math.ceil(PRIOR_SHARE * want) if prior is not None and tuned_for is not None else 0
    wide = min(max(want, candidates_for(k, depth)), ann.ntotal) if lift else want
    approx, cand = ann.search(queries, wide, params=faiss.SearchParametersIVF(nprobe=int(nprobe)))
    scores = np.full((len(queries), k), -np.inf, dtype=np.float32)
    ids = np.full((len(queries), k), -1, dtype=np.int64)
    for row, (q, c, a) in enumerate(zip(queries, cand, approx)):
        if wide > want:
            rest, rest_a = c[want:], a[want:]
            rest, rest_a = rest[rest >= 0], rest_a[rest >= 0]
            lifted = rest[np.argsort(-(rest_a - prior[rest]), kind="stable")[:lift]]
            c = np.concatenate([c[:want], lifted])
        c = np.unique(c[c >= 0])  # sorted: the file is read in order
        if not len(c):
            continue
        s = read(vectors, c) @ q
        top = np.argsort(-s, kind="stable")[:k]
        scores[row, : len(top)], ids[row, : len(top)] = s[top], c[top]
    return scores, ids


def exact_topk(vectors: np.ndarray, queries: np.ndarray, k: int, chunk: int = CHUNK_ROWS) -> np.ndarray:
    """Ids of the exact top-k (inner product) of each query, by a scan of ``vectors`` ``chunk`` rows at a time, read
    from the file (``read_block``): the ground truth of the recall of a structure too large to hold as floats."""
    best_s = np.full((len(queries), 0), -np.inf, dtype=np.float32)
    best_i = np.zeros((len(queries), 0), dtype=np.int64)
    q = np.ascontiguousarray(queries, dtype=np.float32)
    for start in range(0, len(vectors), chunk):
        s = q @ read_block(vectors, start, min(start + chunk, len(vectors))).T
        np.negative(s, out=s)
        top = np.argpartition(s, min(k, s.shape[1]) - 1, axis=1)[:, :k]
        best_s, best_i = merge_topk(best_s, best_i, -np.take_along_axis(s, top, 1), top + start, k)
        del s, top
    return best_i


def merge_topk(s1, i1, s2, i2, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k best (score desc, then id asc) of two candidate sets per row."""
    s, i = np.concatenate([s1, s2], axis=1), np.concatenate([i1, i2], axis=1)
    order = np.lexsort((i, -s), axis=1)[:, :k]
    return np.take_along_axis(s, order, 1), np.take_along_axis(i, order, 1)


# -- the vectors file -----------------------------------------------------------------------------------------
class VectorsFile:
    """``vectors.<g>.f32``: raw float32 rows, appended to in chunks; ``rows()`` maps them read-only."""

    def __init__(self, path: Path, dim: int, count: int = 0):
        self.path, self.dim, self.count = Path(path), int(dim), int(count)

    @classmethod
    def create(cls, path: Path, dim: int) -> VectorsFile:
        """A new empty file (replacing one a killed writer may have left under this name)."""
        Path(path).write_bytes(b"")
        return cls(path, dim, 0)

    @classmethod
    def extend(cls, old: Path, new: Path, dim: int, count: int) -> VectorsFile:
        """The next generation's file: ``old``'s first ``count`` rows under the name ``new`` (a hard link, cut back
        to ``count`` rows in case a killed writer left more; a copy where hard links are refused)."""
        new.unlink(missing_ok=True)
        try:
            os.link(old, new)
        except OSError:
            import shutil

            shutil.copyfile(old, new)
        with open(new, "r+b") as fh:
            fh.truncate(count * dim * 4)
        return cls(new, dim, count)

    def append(self, rows: np.ndarray) -> None:
        rows = np.ascontiguousarray(rows, dtype=np.float32)
        if rows.ndim != 2 or rows.shape[1] != self.dim:
            raise DataError(f"rows of shape {rows.shape} do not fit a {self.dim}-d index")
        with open(self.path, "ab") as fh:
            fh.write(rows.tobytes())
        self.count += len(rows)

    def finish(self) -> int:
        """fsync the file; returns its size in bytes."""
        with open(self.path, "rb") as fh:
            os.fsync(fh.fileno())
        return self.count * self.dim * 4

    def rows(self) -> np.ndarray:
        return open_rows(self.path, self.count, self.dim)


def open_rows(path: Path, n: int, dim: int) -> np.ndarray:
    """The first n rows of a raw float32 vectors file, memory-mapped read-only."""
    if n == 0:
        return np.zeros((0, dim), dtype=np.float32)
    return np.memmap(path, dtype=np.float32, mode="r", shape=(n, dim))
