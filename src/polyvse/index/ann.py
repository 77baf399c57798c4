"""Choosing and building the search structure; measuring and tuning the recall of approximate search.

Recall is measured against exact search (IndexFlatIP over the same vectors) as recall@k: the share of
the exact top-k photos that the approximate search also returns, averaged over probe queries, and tuning takes
the lower of two probe sets (``probe_sets``): normalised midpoints of random pairs of indexed photos, which lie
between photos, and indexed photos that leave themselves out, which ask what a new photo like them would (a
query on its own row would find itself and look better than it is). Neither alone tells the truth everywhere:
on spread-out data the midpoints are the harder ones; where many photos crowd round a few (the 10M scale bench,
~1,260 near-copies of each real photo) the midpoints fell between the crowds and measured 0.95 while held-out
queries found 0.83, and the members track held-out queries (tests/test_compressed_index.py).

Above the exact threshold the default is IVF-Flat: on a 2-core machine it trains and fills 50,000
512-d vectors in seconds, where HNSW (M 32, efConstruction 200) did not finish 50,000 in 15 minutes.
HNSW stays available on request (lighter construction: M 32, efConstruction 64).

With a memory budget (``max_memory``), a collection whose exact or IVF-Flat structure would not fit gets the
compressed structure (``ivfpq``, see ``compressed``) with the finest codes that fit; without one, or when the usual
structure fits, nothing changes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from ..errors import DataError
from ..util.arrays import normalize_rows
from .compressed import (
    DEFAULT_DEPTH,
    MAX_DEPTH,
    PHOTO_ENTRY_BYTES,
    chunk_rows,
    exact_topk,
    flat_bytes,
    gather,
    read_file_rows,
    rerank_search,
)
from .store import (
    DEFAULT_EXACT_THRESHOLD,
    DEFAULT_RECALL_TARGET,
    EXACT,
    EXACT_MODEL,
    HNSW,
    HNSW_EF_CONSTRUCTION,
    HNSW_M,
    IVF,
    IVF_TRAIN_PER_LIST,
    IVFPQ,
    MAX_EF_SEARCH,
    RECALL_K,
)

REQUESTABLE = ("auto", "exact", "ivf", "hnsw", "ivfpq")
RECALL_PLATEAU = 0.005  # a doubling of nprobe that gains less than this: the lists are not what holds recall back
N_PROBES = 256


def choose_kind(
    n: int,
    similarity: str,
    requested: str = "auto",
    exact_threshold: int = DEFAULT_EXACT_THRESHOLD,
    *,
    dim: int = 0,
    max_memory: int | None = None,
) -> str:
    """The structure for n photos: what was requested, else exact below the threshold and IVF above, or the
    compressed one where that would not fit ``max_memory`` bytes (with the photos' entries) at ``dim``."""
    if requested not in REQUESTABLE:
        raise DataError(f"index kind {requested!r}: choose one of {', '.join(REQUESTABLE)}")
    if similarity != "cosine":
        if requested in (IVF, HNSW, IVFPQ):
            raise DataError(
                f"this model scores with the {similarity} similarity, which no inner-product index "
                "can rank; its index can only be exact (use --kind auto or exact)"
            )
        return EXACT_MODEL
    if requested == "exact":
        return EXACT
    if requested in (IVF, HNSW, IVFPQ):
        return requested
    if max_memory is not None and flat_bytes(n, dim) + n * PHOTO_ENTRY_BYTES > max_memory:
        return IVFPQ
    return EXACT if n < exact_threshold else IVF


def probe_queries(vectors: np.ndarray, n_probes: int = N_PROBES, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = len(vectors)
    a = rng.integers(0, n, size=n_probes)
    b = rng.integers(0, n, size=n_probes)
    return normalize_rows(gather(vectors, a) + gather(vectors, b))  # a memory map: read, not mapped


def member_rows(n: int, n_probes: int = N_PROBES, seed: int = 1) -> np.ndarray:
    """Distinct random rows of n (all of them when n is smaller than n_probes), sorted."""
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n, size=min(n, n_probes), replace=False))


def without_self(ids: np.ndarray, rows: np.ndarray, k: int) -> np.ndarray:
    """Each row of ``ids`` (k + 1 results of a query that is the indexed row ``rows[i]``) without that row, cut
    to k (-1 where fewer remain)."""
    out = np.full((len(ids), k), -1, dtype=np.int64)
    for i, (found, own) in enumerate(zip(ids, rows)):
        rest = found[found != own][:k]
        out[i, : len(rest)] = rest
    return out


class ProbeSet(NamedTuple):
    """Queries with their exact top-k; ``rows``: the indexed row each query is (members), None for midpoints."""

    queries: np.ndarray
    truth: np.ndarray
    rows: np.ndarray | None


def probe_sets(vectors: np.ndarray, k: int, exact: Callable) -> list[ProbeSet]:
    """Midpoint probes and member probes (see the module's note), truths from one ``exact(vectors, queries, k)``
    call for both (one pass over a collection that may have to be read from disk)."""
    mids = probe_queries(vectors)
    if len(vectors) <= k:  # a member needs k others to be scored against
        return [ProbeSet(mids, exact(vectors, mids, k), None)]
    rows = member_rows(len(vectors))
    members = read_file_rows(vectors, rows)
    truth = exact(vectors, np.concatenate([mids, members]), k + 1)  # best first: a midpoint's top k lead its k + 1
    return [
        ProbeSet(mids, truth[: len(mids), :k], None),
        ProbeSet(members, without_self(truth[len(mids) :], rows, k), rows),
    ]


def probe_recall(search: Callable, sets: Sequence[ProbeSet], k: int) -> float:
    """The lowest recall@k over the probe sets of ``search(queries, k) -> ids``."""
    recalls = []
    for s in sets:
        found = search(s.queries, k) if s.rows is None else without_self(search(s.queries, k + 1), s.rows, k)
        recalls.append(_recall(found, s.truth))
    return min(recalls)


def exact_neighbours(vectors: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    import faiss

    flat = faiss.IndexFlatIP(vectors.shape[1])
    flat.add(np.ascontiguousarray(vectors, dtype=np.float32))
    return flat.search(queries, k)[1]


def _faiss_search(ann, params) -> Callable:
    return lambda queries, k: ann.search(queries, k, params=params)[1]


# -- IVF --------------------------------------------------------------------------------------------------
def ivf_lists(n: int) -> int:
    """nlist: ~4 sqrt(n), but at least 39 training vectors per list (FAISS's k-means minimum)."""
    return max(1, min(int(4 * math.sqrt(n)), n // 39))


def new_ivf(vectors: np.ndarray, seed: int = 0):
    """(trained and filled IVF-Flat index, nlist)."""
    import faiss

    n, dim = vectors.shape
    nlist = ivf_lists(n)
    ann = faiss.index_factory(dim, f"IVF{nlist},Flat", faiss.METRIC_INNER_PRODUCT)
    rng = np.random.default_rng(seed)
    m = min(n, IVF_TRAIN_PER_LIST * nlist)
    sample = vectors if m == n else vectors[np.sort(rng.choice(n, size=m, replace=False))]
    ann.cp.seed = seed
    ann.train(np.ascontiguousarray(sample, dtype=np.float32))
    ann.add(np.ascontiguousarray(vectors, dtype=np.float32))
    return ann, nlist


def tune_nprobe(
    ann, vectors: np.ndarray, nlist: int, recall_target: float = DEFAULT_RECALL_TARGET, k: int = RECALL_K
) -> tuple[int, float]:
    """Smallest nprobe (doubling from 1, at most nlist) whose measured recall@k reaches the target."""
    import faiss

    _check_target(recall_target)
    k = min(k, len(vectors))
    sets = probe_sets(vectors, k, exact_neighbours)
    nprobe = 1
    while True:
        recall = probe_recall(_faiss_search(ann, faiss.SearchParametersIVF(nprobe=nprobe)), sets, k)
        if recall >= recall_target or nprobe >= nlist:
            return nprobe, recall
        nprobe = min(nprobe * 2, nlist)


def tune_compressed(
    ann,
    vectors: np.ndarray,
    nlist: int,
    recall_target: float = DEFAULT_RECALL_TARGET,
    k: int = RECALL_K,
    budget: int | None = None,
) -> tuple[int, int, float]:
    """(nprobe, depth, recall@k) of the compressed structure that reach the recall target: nprobe doubles from 1
    with ``DEFAULT_DEPTH`` candidates re-ranked per 10; where recall stops rising with nprobe (or every list is
    probed) the codes, not the lists, hold it back, and the depth doubles instead (up to MAX_DEPTH). The exact
    top-k comes from a chunked scan of ``vectors`` (a memory map: never loaded whole, and read, not mapped, as are
    the candidates re-ranked: chunks that keep to ``budget`` bytes, ``compressed.chunk_rows``)."""
    _check_target(recall_target)
    k = min(k, len(vectors))
    chunk = chunk_rows(vectors.shape[1], budget)
    sets = probe_sets(vectors, k, lambda v, q, kk: exact_topk(v, q, kk, chunk))
    nprobe, depth, previous = 1, DEFAULT_DEPTH, None
    while True:
        recall = probe_recall(_rerank(ann, vectors, nprobe, depth), sets, k)
        if recall >= recall_target or (nprobe >= nlist and depth >= MAX_DEPTH):
            return nprobe, depth, recall
        stalled = previous is not None and recall - previous < RECALL_PLATEAU
        if (stalled or nprobe >= nlist) and depth < MAX_DEPTH:
            depth, previous = min(depth * 2, MAX_DEPTH), None
        else:
            nprobe, previous = min(nprobe * 2, nlist), recall


def _rerank(ann, vectors: np.ndarray, nprobe: int, depth: int) -> Callable:
    return lambda queries, k: rerank_search(ann, vectors, queries, k, nprobe, depth, read=read_file_rows)[1]


def _recall(found: np.ndarray, truth: np.ndarray) -> float:
    hits = sum(len(set(f[f >= 0].tolist()) & set(t[t >= 0].tolist())) for f, t in zip(found, truth))
    total = int((truth >= 0).sum())
    return hits / total if total else 1.0


# -- HNSW -------------------------------------------------------------------------------------------------
def new_hnsw(dim: int):
    import faiss

    ann = faiss.IndexHNSWFlat(dim, HNSW_M, faiss.METRIC_INNER_PRODUCT)
    ann.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
    return ann


def tune_ef_search(
    ann, vectors: np.ndarray, recall_target: float = DEFAULT_RECALL_TARGET, k: int = RECALL_K, start: int = 16
) -> tuple[int, float]:
    """Smallest efSearch (doubling from ``start``) whose measured recall@k reaches the target.

    If even MAX_EF_SEARCH misses the target, returns that with its recall; the manifest records it and
    `polyvse index info` shows it.
    """
    import faiss

    _check_target(recall_target)
    k = min(k, len(vectors))
    if k == 0:
        return start, 1.0
    sets = probe_sets(vectors, k, exact_neighbours)
    ef = max(start, k)
    while True:
        recall = probe_recall(_faiss_search(ann, faiss.SearchParametersHNSW(efSearch=ef)), sets, k)
        if recall >= recall_target or ef >= MAX_EF_SEARCH:
            return ef, recall
        ef = min(ef * 2, MAX_EF_SEARCH)


def _check_target(recall_target: float) -> None:
    if not 0 < recall_target <= 1:
        raise DataError(f"recall target must be in (0, 1], not {recall_target}")


def search_section(
    kind: str, *, exact_threshold: int, recall_target: float, recall: float | None = None, **params
) -> dict:
    """The manifest's "search" section. params: ef_search (hnsw), nlist, nprobe, trained_on (ivf; ivfpq: also
    code_bytes, sub_quantizers, depth), max_memory (the budget it was built under, when there was one)."""
    approximate = (IVF, HNSW, IVFPQ)
    section = {
        "kind": kind,
        "metric": "model" if kind == EXACT_MODEL else "inner_product",
        "exact_threshold": int(exact_threshold),
        "recall_target": float(recall_target),
        "recall_k": RECALL_K,
        "measured_recall": 1.0 if kind not in approximate else float(recall),
    }
    if params.get("max_memory") is not None:
        section["max_memory"] = int(params["max_memory"])
    if kind == HNSW:
        section["hnsw"] = {"M": HNSW_M, "ef_construction": HNSW_EF_CONSTRUCTION, "ef_search": int(params["ef_search"])}
    if kind == IVF:
        section["ivf"] = {
            "nlist": int(params["nlist"]),
            "nprobe": int(params["nprobe"]),
            "trained_on": int(params["trained_on"]),
        }
    if kind == IVFPQ:
        section["ivfpq"] = {
            "nlist": int(params["nlist"]),
            "nprobe": int(params["nprobe"]),
            "trained_on": int(params["trained_on"]),
            "sub_quantizers": int(params["sub_quantizers"]),
            "code_bytes": int(params["sub_quantizers"]) // 2,
            "bits": 4,
            "depth": int(params["depth"]),
            "factory": f"IVF{int(params['nlist'])},PQ{int(params['sub_quantizers'])}x4fs",
            "rerank": "exact inner product over the full vectors, memory-mapped from disk",
        }
    if kind in approximate:
        section["recall_note"] = (
            f"recall@{RECALL_K} against exact search on {N_PROBES} probe queries "
            "(normalised midpoints of random pairs of indexed photos)"
            + (", exact by a chunked scan of the vectors file" if kind == IVFPQ else "")
        )
    return section
