"""RCSLS: the relaxed CSLS loss for learning a bilingual word map (Joulin et al. 2018, "Loss in translation:
Learning bilingual word mapping with a retrieval criterion", EMNLP, Eq. 6-7).

For training pairs ``(x_i, y_i)``, a linear map ``W`` (rows mapped as ``x @ W``), the set of all target
vectors ``Y_all`` and of all mapped source vectors ``X_all W``::

    L(W) = 1/n sum_i [ -2 <x_i W, y_i>
                       + 1/k sum_{y in N_k(x_i W; Y_all)}   <x_i W, y>
                       + 1/k sum_{x in N_k(y_i; X_all W)}   <x W, y_i> ]

This is the CSLS criterion (``polyvse.csls.vocabulary``) turned into a loss. Joulin et al. write it with
dot products of L2-normalised word vectors, which equal the cosines of the brief's formulation when
``W`` is orthogonal; like the paper, its reference code (fastText ``alignment/align.py``), AME's code
(AME Eq. 3) and the Translator poster's formula, the loss uses the dot products by default, so that the
spectral-constraint relaxation (``W`` not orthogonal) optimises the same objective as the paper.
``normalize=True`` re-normalises the mapped vectors first (true cosines).

The k-nearest-neighbour sets are chosen without gradient (a top-k selection); the loss is differentiable
in the selected similarities, which gives exactly the reference code's (sub)gradient. Gradients flow into
``W`` through both ``mapped_src`` and ``src_all_mapped`` and, if they require grad, into the embeddings.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn
from torch.nn import functional as F

from .procrustes import nearest_orthogonal, procrustes

__all__ = ["rcsls_loss", "RCSLSLoss", "fit_rcsls", "spectral_projection"]


def _topk_indices(queries: torch.Tensor, keys: torch.Tensor, k: int, chunk_size: int) -> torch.Tensor:
    """(n_q, k) indices of each query's k largest dot products with ``keys`` (no autograd, chunked)."""
    out = torch.empty((queries.shape[0], k), dtype=torch.long, device=queries.device)
    with torch.no_grad():
        q, kk = queries.detach(), keys.detach()
        for start in range(0, q.shape[0], chunk_size):
            out[start : start + chunk_size] = (q[start : start + chunk_size] @ kk.T).topk(k, dim=1).indices
    return out


def rcsls_loss(
    mapped_src: torch.Tensor,
    tgt: torch.Tensor,
    src_all_mapped: torch.Tensor,
    tgt_all: torch.Tensor,
    k: int = 10,
    *,
    normalize: bool = False,
    chunk_size: int = 4096,
) -> torch.Tensor:
    """The RCSLS loss (module docstring), averaged over the ``n`` pairs; a scalar tensor.

    mapped_src: ``(n, d)`` = ``X_pairs @ W``, the mapped source vectors of the training pairs.
    tgt: ``(n, d)`` target vectors of the same pairs (row ``i`` translates row ``i``).
    src_all_mapped: ``(N_s, d)`` = ``X_all @ W``, the mapped source vocabulary (the neighbourhood set of
        the third term; the full vocabulary or a sample of negatives, as fastText's ``--maxneg``).
    tgt_all: ``(N_t, d)`` the target vocabulary (neighbourhood set of the second term).
    k: neighbourhood size, ``1 <= k <= min(N_s, N_t)``. AME uses k=5 (Multi30K) / 4 (COCO); Joulin et al. 10.
    normalize: L2-normalise all four inputs first, so every term is a cosine (see module docstring).

    The pairs themselves are not removed from the neighbourhoods (as in the reference implementation).
    """
    for name, t in (("mapped_src", mapped_src), ("tgt", tgt), ("src_all_mapped", src_all_mapped), ("tgt_all", tgt_all)):
        if t.dim() != 2:
            raise ValueError(f"{name} must be a 2-D (n, d) tensor, got shape {tuple(t.shape)}")
    if mapped_src.shape != tgt.shape:
        raise ValueError(
            f"mapped_src and tgt must have the same shape (paired rows), got "
            f"{tuple(mapped_src.shape)} and {tuple(tgt.shape)}"
        )
    if mapped_src.shape[0] == 0:
        raise ValueError("need at least one training pair")
    d = tgt.shape[1]
    if src_all_mapped.shape[1] != d or tgt_all.shape[1] != d:
        raise ValueError(
            f"all inputs must have dimension {d}, got src_all_mapped {src_all_mapped.shape[1]} "
            f"and tgt_all {tgt_all.shape[1]}"
        )
    k = int(k)
    if not 1 <= k <= min(src_all_mapped.shape[0], tgt_all.shape[0]):
        raise ValueError(
            f"k must be in [1, {min(src_all_mapped.shape[0], tgt_all.shape[0])}] (the size of the "
            f"neighbourhood sets), got {k}"
        )
    if normalize:
        mapped_src, tgt = F.normalize(mapped_src, dim=1, eps=1e-8), F.normalize(tgt, dim=1, eps=1e-8)
        src_all_mapped = F.normalize(src_all_mapped, dim=1, eps=1e-8)
        tgt_all = F.normalize(tgt_all, dim=1, eps=1e-8)

    paired = (mapped_src * tgt).sum(dim=1)
    nn_t = _topk_indices(mapped_src, tgt_all, k, chunk_size)  # N_k(x_i W) among Y_all
    nn_s = _topk_indices(tgt, src_all_mapped, k, chunk_size)  # N_k(y_i) among X_all W
    # mean of the k neighbour vectors, without materialising (n, k, d); differentiable in the tables.
    r_t = (mapped_src * F.embedding_bag(nn_t, tgt_all, mode="mean")).sum(dim=1)
    r_s = (tgt * F.embedding_bag(nn_s, src_all_mapped, mode="mean")).sum(dim=1)
    return (-2.0 * paired + r_t + r_s).mean()


class RCSLSLoss(nn.Module):
    """Module form of :func:`rcsls_loss`: ``RCSLSLoss(k)(mapped_src, tgt, src_all_mapped, tgt_all)``."""

    def __init__(self, k: int = 10, normalize: bool = False, chunk_size: int = 4096):
        super().__init__()
        if int(k) < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        self.k = int(k)
        self.normalize = bool(normalize)
        self.chunk_size = int(chunk_size)

    def forward(
        self, mapped_src: torch.Tensor, tgt: torch.Tensor, src_all_mapped: torch.Tensor, tgt_all: torch.Tensor
    ) -> torch.Tensor:
        return rcsls_loss(
            mapped_src, tgt, src_all_mapped, tgt_all, self.k, normalize=self.normalize, chunk_size=self.chunk_size
        )

    def extra_repr(self) -> str:
        return f"k={self.k}, normalize={self.normalize}"


def spectral_projection(W: torch.Tensor, max_sv: float = 1.0) -> torch.Tensor:
    """Project ``W`` onto ``{W : ||W||_2 <= max_sv}`` by clipping its singular values to ``[0, max_sv]``.

    The "spectral" constraint of Joulin et al. (Sec. 3.2, the convex hull of orthogonal matrices is the unit
    spectral-norm ball); singular values are non-negative, so this is the reference code's
    ``s[s > 1] = 1; s[s < 0] = 0``.
    """
    U, s, Vh = torch.linalg.svd(W.detach().to(torch.float64), full_matrices=False)
    return ((U * s.clamp(0.0, max_sv)) @ Vh).to(W.dtype)


def fit_rcsls(
    X: torch.Tensor,
    Y: torch.Tensor,
    src_all: torch.Tensor | None = None,
    tgt_all: torch.Tensor | None = None,
    *,
    init: Literal["procrustes", "identity"] | torch.Tensor = "procrustes",
    epochs: int = 10,
    lr: float = 1.0,
    k: int = 10,
    constraint: Literal["spectral", "orthogonal"] | None = None,
    batch_size: int | None = None,
    reg: float = 0.0,
    min_lr: float = 1e-4,
    normalize: bool = False,
    generator: torch.Generator | None = None,
    history: list[float] | None = None,
    chunk_size: int = 4096,
) -> torch.Tensor:
    """Learn a linear map ``W`` (``X @ W ~ Y``) by minimising :func:`rcsls_loss`; returns ``W`` (detached).

    Follows Joulin et al.'s reference procedure (fastText ``alignment/align.py``), the Translator poster's
    "SVD + RCSLS": start from the Procrustes solution, then take gradient steps on the full training set
    with step size ``lr``; a step that increases the loss is rejected and ``lr`` halved; stop after
    ``epochs`` steps or when ``lr < min_lr``. (The reference code's rollback aliases the rejected numpy
    array; here a rejected step is truly undone, so the loss never increases.)

    X, Y: ``(n, d)`` paired training vectors (row i of X translates to row i of Y). Pass unit rows (the
        reference normalises, optionally centres, the word vectors).
    src_all, tgt_all: neighbourhood sets (source / target vocabularies, or sampled negatives like the
        reference's ``--maxneg``); default: ``X`` and ``Y`` themselves.
    init: "procrustes" (default), "identity", or a ``(d, d)`` starting matrix.
    constraint: None (reference default ``--model none``), "spectral" (clip singular values to [0, 1]
        after every step, ``--model spectral``) or "orthogonal" (project onto the nearest orthogonal matrix,
        as AME describes Joulin et al.'s map, AME Sec. 3.2).
    batch_size: if set and smaller than ``n``, every epoch is a pass of SGD over shuffled mini-batches
        (reference ``--sgd``), without step rejection.
    reg: weight decay, ``W <- (1 - lr*reg) W`` before each step (reference ``--reg``).
    history: if a list is given, the full-batch loss after each epoch is appended to it (index 0 = init).
    """
    _check_arguments(X, Y, constraint, epochs, lr)
    X, Y = X.detach(), Y.detach()
    src, tgt = X if src_all is None else src_all.detach(), Y if tgt_all is None else tgt_all.detach()
    objective = _RcslsObjective(X, Y, src, tgt, k, normalize, chunk_size)
    W = _project(_initial_map(X, Y, init), constraint)
    f, g = objective(W)
    if history is not None:
        history.append(f)
    n = X.shape[0]
    sgd = batch_size is not None and 0 < batch_size < n
    for _ in range(int(epochs)):
        if lr < min_lr:
            break
        if sgd:
            perm = torch.randperm(n, generator=generator).to(X.device)
            W = _sgd_pass(objective, W, perm, batch_size, lr, reg, constraint)
            f, g = objective(W)
        else:
            W_try = _project(W * (1.0 - lr * reg) - lr * g, constraint)
            f_try, g_try = objective(W_try)
            if f_try > f:
                lr /= 2.0
            else:
                W, f, g = W_try, f_try, g_try
        if history is not None:
            history.append(f)
    return W.detach()


def _check_arguments(X: torch.Tensor, Y: torch.Tensor, constraint, epochs: int, lr: float) -> None:
    if X.dim() != 2 or Y.dim() != 2 or X.shape[0] != Y.shape[0]:
        raise ValueError(f"X and Y must be paired (n, d) tensors, got {tuple(X.shape)} and {tuple(Y.shape)}")
    if constraint not in (None, "spectral", "orthogonal"):
        raise ValueError(f"constraint must be None, 'spectral' or 'orthogonal', got {constraint!r}")
    if epochs < 0 or lr <= 0:
        raise ValueError(f"need epochs >= 0 and lr > 0, got epochs={epochs}, lr={lr}")


def _sgd_pass(
    objective, W: torch.Tensor, perm: torch.Tensor, batch_size: int, lr: float, reg: float, constraint
) -> torch.Tensor:
    """One epoch of SGD over the mini-batches of ``perm`` (no step rejection); returns the new map."""
    for start in range(0, len(perm), batch_size):
        _, gb = objective(W, perm[start : start + batch_size])
        W = _project(W * (1.0 - lr * reg) - lr * gb, constraint)
    return W


def _initial_map(X: torch.Tensor, Y: torch.Tensor, init) -> torch.Tensor:
    if isinstance(init, torch.Tensor):
        W = init.detach().to(dtype=X.dtype, device=X.device).clone()
    elif init == "procrustes":
        W = procrustes(X, Y)
    elif init == "identity":
        if X.shape[1] != Y.shape[1]:
            raise ValueError("init='identity' needs X and Y of the same dimension")
        W = torch.eye(X.shape[1], dtype=X.dtype, device=X.device)
    else:
        raise ValueError(f"init must be 'procrustes', 'identity' or a tensor, got {init!r}")
    if W.shape != (X.shape[1], Y.shape[1]):
        raise ValueError(f"init matrix must have shape {(X.shape[1], Y.shape[1])}, got {tuple(W.shape)}")
    return W


def _project(M: torch.Tensor, constraint: str | None) -> torch.Tensor:
    if constraint == "spectral":
        return spectral_projection(M)
    if constraint == "orthogonal":
        return nearest_orthogonal(M)
    return M


class _RcslsObjective:
    """(RCSLS loss, its gradient) at a map ``M``, on all training pairs or on the pairs ``rows``."""

    def __init__(self, X, Y, src_all, tgt_all, k: int, normalize: bool, chunk_size: int):
        self.X, self.Y, self.src_all, self.tgt_all = X, Y, src_all, tgt_all
        self.k, self.normalize, self.chunk_size = k, normalize, chunk_size

    def __call__(self, M: torch.Tensor, rows: torch.Tensor | None = None) -> tuple[float, torch.Tensor]:
        M = M.detach().requires_grad_(True)
        xs, ys = (self.X, self.Y) if rows is None else (self.X[rows], self.Y[rows])
        with torch.enable_grad():
            loss = rcsls_loss(
                xs @ M, ys, self.src_all @ M, self.tgt_all, self.k, normalize=self.normalize, chunk_size=self.chunk_size
            )
            (grad,) = torch.autograd.grad(loss, M)
        return float(loss.detach()), grad
