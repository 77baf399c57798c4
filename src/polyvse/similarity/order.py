"""Asymmetric similarity: the order-embedding score of Vendrov et al. (2016), as used by Gella et al. and AME."""

from __future__ import annotations

import torch
from torch import nn


def _order_violation_direct(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """E[i, j] = ||max(0, b_j - a_i)||^2 by broadcasting (materialises (n, m, d))."""
    return (b.unsqueeze(0) - a.unsqueeze(1)).clamp(min=0).pow(2).sum(-1)


class _ChunkedOrderViolation(torch.autograd.Function):
    """E[i, j] = ||max(0, b_j - a_i)||^2, computed `chunk` rows of `a` at a time in forward AND backward.

    Nothing of size (n, m, d) is kept for backward: the chunk's differences are recomputed there.
    dE_ij/da_i = -2 max(0, b_j - a_i),  dE_ij/db_j = +2 max(0, b_j - a_i).
    """

    @staticmethod
    def forward(ctx, a: torch.Tensor, b: torch.Tensor, chunk: int) -> torch.Tensor:
        ctx.save_for_backward(a, b)
        ctx.chunk = chunk
        out = a.new_empty(a.shape[0], b.shape[0])
        for start in range(0, a.shape[0], chunk):
            out[start : start + chunk] = _order_violation_direct(a[start : start + chunk], b)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_out: torch.Tensor):
        a, b = ctx.saved_tensors
        chunk = ctx.chunk
        need_a, need_b = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        grad_a = torch.zeros_like(a) if need_a else None
        grad_b = torch.zeros_like(b) if need_b else None
        for start in range(0, a.shape[0], chunk):
            r = (b.unsqueeze(0) - a[start : start + chunk].unsqueeze(1)).clamp(min=0)  # (c, m, d)
            g = grad_out[start : start + chunk]  # (c, m)
            if need_a:
                grad_a[start : start + chunk] = -2.0 * torch.einsum("cm,cmd->cd", g, r)
            if need_b:
                grad_b += 2.0 * torch.einsum("cm,cmd->md", g, r)
        return grad_a, grad_b, None


class OrderSimilarity(nn.Module):
    """Order-embedding score S(a, b) = -||max(0, |b| - |a|)||^2  (Vendrov et al. 2016; Gella et al. 2017 Eq. 3; AME Eq. 5).

    Argument order (the score is asymmetric): ``a`` is the IMAGE, the more specific concept, and ``b`` is
    the CAPTION, its more general abstraction -- exactly Gella et al.'s "where a and b are embeddings of
    image and description" (AME says the same). The score is 0 iff the caption lies coordinate-wise
    below the image (b <= a, Vendrov's reversed product order where general concepts sit near the origin)
    and it is negative otherwise. ``forward(images, captions)`` therefore gives the usual
    (n_images, n_captions) matrix that ``HingeRankingLoss`` expects. For caption-caption scores (Gella's
    PARALLEL term) the first argument plays the "specific" role.

    Choices where the papers are open:
    - Non-negativity: both inputs pass through ``abs()`` first (Gella footnote 1: "taking their absolute
      value"; Vendrov's code does the same). ``abs`` has gradient 0 at exactly 0.
    - The squared norm is used, as in Gella Eq. 3 / AME Eq. 5 / Vendrov's paper (VSE++'s order variant uses
      the unsquared norm; we do not).
    - No normalisation is applied (Vendrov L2-normalises inside the encoders; that is the encoders' job).

    ``forward`` switches to a chunked custom autograd function when n*m*d exceeds ``max_elements``, so
    neither the forward pass nor the saved-for-backward state materialises the (n, m, d) difference tensor;
    below the threshold it broadcasts directly (also twice differentiable).
    """

    name = "order"

    def __init__(self, max_elements: int = 2**24):
        super().__init__()
        if max_elements < 1:
            raise ValueError(f"max_elements must be positive, got {max_elements}")
        self.max_elements = int(max_elements)

    @staticmethod
    def normalize(x: torch.Tensor) -> torch.Tensor:
        """The non-negativity constraint: embeddings live in the positive orthant."""
        return x.abs()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """(len a, len b) matrix of S(a_i, b_j); a = images (specific), b = captions (general)."""
        if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[1]:
            raise ValueError(f"expected (n, d) and (m, d) tensors, got {tuple(a.shape)} and {tuple(b.shape)}")
        a, b = self.normalize(a), self.normalize(b)
        n, m, d = a.shape[0], b.shape[0], a.shape[1]
        if n * m * d <= self.max_elements:
            return -_order_violation_direct(a, b)
        chunk = max(1, self.max_elements // max(1, m * d))
        return -_ChunkedOrderViolation.apply(a, b, chunk)

    def paired(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """Scores of aligned rows: S(a_i, b_i) -> (n,)."""
        if a.shape != b.shape:
            raise ValueError(f"paired scores need equal shapes, got {tuple(a.shape)} and {tuple(b.shape)}")
        return -(self.normalize(b) - self.normalize(a)).clamp(min=0).pow(2).sum(-1)
