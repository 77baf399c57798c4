"""Orthogonal Procrustes: the closed-form orthogonal map between two paired embedding sets.

Convention used throughout ``polyvse.alignment``: embeddings are ROWS and a map is applied on the right,
``mapped = X @ W``. (The fastText/AME reference code stores ``R = W.T`` and computes ``X @ R.T``.)
"""

from __future__ import annotations

import torch

__all__ = ["procrustes", "nearest_orthogonal"]


def _check_pair(X: torch.Tensor, Y: torch.Tensor) -> None:
    if X.dim() != 2 or Y.dim() != 2:
        raise ValueError(f"expected 2-D (n, d) tensors, got shapes {tuple(X.shape)} and {tuple(Y.shape)}")
    if X.shape[0] != Y.shape[0]:
        raise ValueError(f"X and Y must have the same number of rows (pairs), got {X.shape[0]} and {Y.shape[0]}")
    if X.shape[0] == 0:
        raise ValueError("need at least one pair")


def nearest_orthogonal(M: torch.Tensor) -> torch.Tensor:
    """The (semi-)orthogonal matrix closest to ``M`` in Frobenius norm: ``U @ Vh`` of ``M = U S Vh``."""
    work = M.detach().to(torch.float64)
    U, _, Vh = torch.linalg.svd(work, full_matrices=False)
    return (U @ Vh).to(M.dtype)


def procrustes(X: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
    """``W = argmin_{W orthogonal} ||X W - Y||_F`` for paired rows ``X[i] <-> Y[i]``.

    Closed form (Schoenemann 1966; Xing et al. 2015; Smith et al. 2017): with the SVD
    ``X^T Y = U S V^T``, ``W = U V^T``. Returns a ``(d_x, d_y)`` matrix in ``X``'s dtype (the SVD runs in
    float64); for ``d_x == d_y`` it is orthogonal, otherwise it has orthonormal rows/columns. The result is
    detached from autograd. Rows are used as given: normalise/centre them beforehand if wanted.
    """
    _check_pair(X, Y)
    M = X.detach().to(torch.float64).T @ Y.detach().to(torch.float64)
    return nearest_orthogonal(M).to(X.dtype)
