"""Cross-domain similarity local scaling (CSLS) and plain nearest-neighbour retrieval between vocabularies.

CSLS (Conneau et al. 2018, "Word translation without parallel data", Sec. 2.3) corrects the hubness of
cosine nearest neighbours. For a (mapped) source vector ``x`` and a target vector ``y``::

    CSLS(x, y) = 2 cos(x, y) - r_T(x) - r_S(y)
    r_T(x) = 1/k sum_{y' in N_T(x)} cos(x, y')     mean cosine of x to its k nearest TARGET vectors
    r_S(y) = 1/k sum_{x' in N_S(y)} cos(x', y)     mean cosine of y to its k nearest SOURCE vectors

The neighbourhoods are always taken over the complete ``src_emb`` / ``tgt_emb`` given, also when only a
subset of source words is queried. All functions here are evaluation-only: inputs are detached, rows are
L2-normalised internally (cosines), and similarity matrices are built ``chunk_size`` rows at a time so the
peak memory is ``chunk_size x n`` floats rather than ``n_src x n_tgt``.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from .scoring import knn_mean

__all__ = ["csls_scores", "csls_retrieve", "nn_retrieve", "knn_mean_similarity"]


def _unit(x: torch.Tensor, name: str) -> torch.Tensor:
    if x.dim() != 2:
        raise ValueError(f"{name} must be a 2-D (n, d) tensor, got shape {tuple(x.shape)}")
    if x.shape[0] == 0:
        raise ValueError(f"{name} is empty")
    x = x.detach()
    if not x.is_floating_point():
        x = x.float()
    return F.normalize(x, dim=1, eps=1e-8)


def _check_k(k: int, n: int, what: str) -> int:
    k = int(k)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if k > n:
        raise ValueError(f"k={k} neighbours requested but {what} has only {n} vectors")
    return k


def _queries(queries, n_src: int, device) -> torch.Tensor:
    if queries is None:
        return torch.arange(n_src, device=device)
    q = torch.as_tensor(queries, dtype=torch.long, device=device).reshape(-1)
    if q.numel() and (int(q.min()) < 0 or int(q.max()) >= n_src):
        raise IndexError(f"query indices must lie in [0, {n_src}), got range [{int(q.min())}, {int(q.max())}]")
    return q


def knn_mean_similarity(queries: torch.Tensor, keys: torch.Tensor, k: int, chunk_size: int = 4096) -> torch.Tensor:
    """For each row of ``queries``: the mean of its ``k`` largest dot products with the rows of ``keys``.

    With unit rows this is CSLS's ``r`` term (mean cosine to the k nearest neighbours). Shape ``(n_q,)``.
    """
    return knn_mean(queries, keys, _check_k(k, keys.shape[0], "the neighbour set"), chunk_size)


def csls_scores(src_emb: torch.Tensor, tgt_emb: torch.Tensor, k: int = 10, chunk_size: int = 4096) -> torch.Tensor:
    """The full ``(n_src, n_tgt)`` CSLS matrix ``2 cos(x_i, y_j) - r_T(x_i) - r_S(y_j)``.

    ``src_emb`` should already be mapped into the target space. Materialises ``n_src x n_tgt`` floats:
    use :func:`csls_retrieve` for large vocabularies.
    """
    src, tgt = _unit(src_emb, "src_emb"), _unit(tgt_emb, "tgt_emb")
    _check_pair_dims(src, tgt)
    r_t = knn_mean_similarity(src, tgt, k, chunk_size)  # (n_src,)
    r_s = knn_mean_similarity(tgt, src, k, chunk_size)  # (n_tgt,)
    return 2.0 * (src @ tgt.T) - r_t[:, None] - r_s[None, :]


def _check_pair_dims(src: torch.Tensor, tgt: torch.Tensor) -> None:
    if src.shape[1] != tgt.shape[1]:
        raise ValueError(f"src_emb and tgt_emb must have the same dimension, got {src.shape[1]} and {tgt.shape[1]}")


def _retrieve(
    src: torch.Tensor,
    tgt: torch.Tensor,
    q: torch.Tensor,
    topk: int,
    chunk_size: int,
    row_offset: torch.Tensor | None,
    col_offset: torch.Tensor | None,
    scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    topk = int(topk)
    if not 1 <= topk <= tgt.shape[0]:
        raise ValueError(f"topk must be in [1, {tgt.shape[0]}] (the number of target vectors), got {topk}")
    idx_out = torch.empty((q.numel(), topk), dtype=torch.long, device=src.device)
    val_out = src.new_empty((q.numel(), topk))
    for start in range(0, q.numel(), chunk_size):
        rows = q[start : start + chunk_size]
        s = scale * (src[rows] @ tgt.T)
        if row_offset is not None:
            s = s - row_offset[rows][:, None]
        if col_offset is not None:
            s = s - col_offset[None, :]
        top = s.topk(topk, dim=1)
        idx_out[start : start + rows.numel()] = top.indices
        val_out[start : start + rows.numel()] = top.values
    return idx_out, val_out


def csls_retrieve(
    src_emb: torch.Tensor,
    tgt_emb: torch.Tensor,
    k: int = 10,
    topk: int = 1,
    queries: torch.Tensor | None = None,
    chunk_size: int = 4096,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Best ``topk`` targets by CSLS for each query source row.

    ``queries``: source row indices to translate (default: all rows). ``r_T`` and ``r_S`` use the complete
    ``tgt_emb`` / ``src_emb`` regardless. Returns ``(indices, scores)``, both ``(n_queries, topk)``,
    best first; ``scores`` are the CSLS values.
    """
    src, tgt = _unit(src_emb, "src_emb"), _unit(tgt_emb, "tgt_emb")
    _check_pair_dims(src, tgt)
    q = _queries(queries, src.shape[0], src.device)
    r_s = knn_mean_similarity(tgt, src, k, chunk_size)  # (n_tgt,) over the whole source vocabulary
    r_t = torch.zeros(src.shape[0], dtype=src.dtype, device=src.device)
    if q.numel():
        _check_k(k, tgt.shape[0], "tgt_emb")
        r_t[q] = knn_mean_similarity(src[q], tgt, k, chunk_size)
    return _retrieve(src, tgt, q, topk, chunk_size, r_t, r_s, 2.0)


def nn_retrieve(
    src_emb: torch.Tensor,
    tgt_emb: torch.Tensor,
    topk: int = 1,
    queries: torch.Tensor | None = None,
    chunk_size: int = 4096,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Best ``topk`` targets by cosine similarity (plain nearest neighbour). Returns ``(indices, cosines)``."""
    src, tgt = _unit(src_emb, "src_emb"), _unit(tgt_emb, "tgt_emb")
    _check_pair_dims(src, tgt)
    q = _queries(queries, src.shape[0], src.device)
    return _retrieve(src, tgt, q, topk, chunk_size, None, None, 1.0)
