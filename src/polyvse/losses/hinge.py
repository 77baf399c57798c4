"""Bidirectional hinge ranking loss over in-batch negatives: sum (VSE), max violation (VSE++), top-K (MULE)."""

from __future__ import annotations

from contextlib import contextmanager

import torch
from torch import nn

REDUCTIONS = ("sum", "mean")


def resolve_top_k(max_violation: bool, top_k: int | None) -> int | None:
    """One number for the three modes: None = every negative, 1 = hardest only (VSE++), K = K hardest."""
    if top_k is not None:
        if isinstance(top_k, bool) or int(top_k) != top_k or top_k < 1:
            raise ValueError(f"top_k must be a positive integer or None, got {top_k!r}")
        top_k = int(top_k)
        if max_violation and top_k != 1:
            raise ValueError(f"max_violation=True means top_k=1; got top_k={top_k} as well")
        return top_k
    return 1 if max_violation else None


def sum_violations(cost: torch.Tensor, valid: torch.Tensor | None = None, top_k: int | None = None) -> torch.Tensor:
    """Per-row total of the hinge costs in `cost` (anchors x candidates) -> (rows,).

    `valid` masks the candidates that are real negatives of the row's anchor (others count 0). With
    `top_k=None` every valid cost is summed; with `top_k=K` only the K largest valid costs of each row
    (K is clipped to the number of columns; rows with fewer valid negatives sum all of theirs).
    Costs must be non-negative (hinge outputs), so masked entries set to 0 never displace a real violation.
    This is the one implementation behind the sum / max-violation / top-K modes of every ranking loss here.
    """
    if valid is not None:
        cost = cost.masked_fill(~valid, 0)
    if cost.shape[-1] == 0:
        return cost.sum(-1)
    if top_k is None:
        return cost.sum(-1)
    k = min(top_k, cost.shape[-1])
    if k == 1:
        return cost.max(dim=-1).values
    return cost.topk(k, dim=-1).values.sum(-1)


@contextmanager
def every_negative(module: nn.Module):
    """Within the block, every image-sentence ranking loss inside ``module`` sums all its negatives, whatever
    its max-violation / top-K setting: the warm-up before hard-negative mining (``hard_negative_warmup_epochs``).
    Mining only the hardest negatives from a random initialisation can stall at the collapsed solution
    (every embedding alike; seen here with MULE's top-K on randomly initialised word embeddings); the
    VSE-infinity code (Chen et al. 2021, ``vse_mean_warmup_epochs``) likewise starts with all negatives and
    switches to max violation after a warm-up. Neighbourhood-constraint losses keep their own K."""
    losses = [m for m in module.modules() if isinstance(m, (HingeRankingLoss, GroupedHingeLoss))]
    saved = [m._k for m in losses]
    for m in losses:
        m._k = None
    try:
        yield
    finally:
        for m, k in zip(losses, saved):
            m._k = k


def reduce_total(total: torch.Tensor, count: int, reduction: str) -> torch.Tensor:
    if reduction == "sum":
        return total
    return total / max(count, 1)


class HingeRankingLoss(nn.Module):
    """scores[i, j] = s(image_i, caption_j) for a batch of distinct photos; the diagonal holds the positives.

    loss = sum_i sum_{j != i} [margin - s_ii + s_ij]_+  (image -> caption negatives)
         + sum_i sum_{j != i} [margin - s_ii + s_ji]_+  (caption -> image negatives)

    Which negatives of each anchor (row for an image, column for a caption) count:
    - default: all of them (Kiros et al. VSE; Gella et al. Eq. 1; Calixto & Liu Eq. 1-2 with in-batch negatives);
    - ``max_violation=True``: only the hardest one (Faghri et al. VSE++);
    - ``top_k=K``: the K hardest, summed (MULE Eq. 3 with K = 10, "the K most violated constraints",
      taken per anchor as in Wang et al.'s two-branch code that MULE follows).
    ``max_violation=True`` is ``top_k=1``. ``reduction="mean"`` divides by the batch size n (per positive pair);
    the default ``"sum"`` is the papers' plain sums (and the original behaviour of this class).
    The scores may come from any similarity; for an asymmetric one (OrderSimilarity) rows must be the
    specific side (images) -- just call ``similarity(images, captions)``.
    """

    def __init__(
        self, margin: float = 0.2, max_violation: bool = False, top_k: int | None = None, reduction: str = "sum"
    ):
        super().__init__()
        if reduction not in REDUCTIONS:
            raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
        self.margin = margin
        self.max_violation = max_violation
        self.top_k = top_k
        self.reduction = reduction
        self._k = resolve_top_k(max_violation, top_k)

    def forward(
        self, scores: torch.Tensor, row_mask: torch.Tensor | None = None, col_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``row_mask`` / ``col_mask`` (n,) bool mark which rows / columns exist (e.g. photos lacking a caption
        in some language): pair i is a positive only if row i and column i both exist; a row anchor's
        negatives are the existing columns j != i, a column anchor's the existing rows i != j. Without masks
        (or with all True) this is exactly the unmasked loss; ``reduction="mean"`` divides by the number of
        positive pairs."""
        if scores.dim() != 2 or scores.shape[0] != scores.shape[1]:
            raise ValueError(f"scores must be a square (batch, batch) matrix, got {tuple(scores.shape)}")
        n = scores.shape[0]
        pos = scores.diag()
        cost_caption = (self.margin - pos[:, None] + scores).clamp(min=0)  # row i: image i vs captions j
        cost_image = (self.margin - pos[None, :] + scores).clamp(min=0)  # column j: caption j vs images i
        negative = ~torch.eye(n, dtype=torch.bool, device=scores.device)
        if row_mask is None and col_mask is None:
            total = (
                sum_violations(cost_caption, negative, self._k).sum()
                + sum_violations(cost_image.T, negative, self._k).sum()
            )
            return reduce_total(total, n, self.reduction)
        true = torch.ones(n, dtype=torch.bool, device=scores.device)
        rows = true if row_mask is None else row_mask.to(device=scores.device, dtype=torch.bool)
        cols = true if col_mask is None else col_mask.to(device=scores.device, dtype=torch.bool)
        if rows.shape != (n,) or cols.shape != (n,):
            raise ValueError(f"row_mask and col_mask must have shape ({n},)")
        anchor = rows & cols  # pairs (i, i) that exist
        per_row = sum_violations(cost_caption, negative & cols[None, :], self._k)
        per_col = sum_violations(cost_image.T, negative & rows[None, :], self._k)
        total = (per_row * anchor).sum() + (per_col * anchor).sum()
        return reduce_total(total, int(anchor.sum()), self.reduction)

    def extra_repr(self) -> str:
        return f"margin={self.margin}, max_violation={self.max_violation}, top_k={self.top_k}, reduction={self.reduction!r}"


class GroupedHingeLoss(nn.Module):
    """Bidirectional hinge for batches with SEVERAL captions per image (MULE's 2 en + 2 de + 1 fr + 1 cs per
    photo): ``scores`` (n_images, m_captions), ``caption_image[j]`` = row of caption j's image.

    For every positive pair (image p = caption_image[j], caption j):
      caption j -> images:  sum over images i != p        of [margin - s(p, j) + s(i, j)]_+
      image p  -> captions: sum over captions j' of other images of [margin - s(p, j) + s(p, j')]_+
    (other captions of the same image are not negatives), each over all / the hardest / the top-K
    negatives as ``HingeRankingLoss``. With one caption per image this equals ``HingeRankingLoss``.
    """

    def __init__(
        self, margin: float = 0.2, max_violation: bool = False, top_k: int | None = None, reduction: str = "sum"
    ):
        super().__init__()
        if reduction not in REDUCTIONS:
            raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
        self.margin, self.max_violation, self.top_k, self.reduction = margin, max_violation, top_k, reduction
        self._k = resolve_top_k(max_violation, top_k)

    def forward(self, scores: torch.Tensor, caption_image: torch.Tensor) -> torch.Tensor:
        if scores.dim() != 2 or caption_image.shape != (scores.shape[1],):
            raise ValueError(
                f"scores must be (n_images, m) and caption_image (m,), got {tuple(scores.shape)} "
                f"and {tuple(caption_image.shape)}"
            )
        ci = caption_image.to(scores.device)
        m = scores.shape[1]
        cols = torch.arange(m, device=scores.device)
        pos = scores[ci, cols]  # (m,)
        img_neg = torch.arange(scores.shape[0], device=scores.device)[None, :] != ci[:, None]  # (m, n)
        cost_img = (self.margin - pos[:, None] + scores.T).clamp(min=0)
        cap_neg = ci[None, :] != ci[:, None]  # (m, m): caption j' of another image than caption j's
        cost_cap = (self.margin - pos[:, None] + scores[ci]).clamp(min=0)
        total = sum_violations(cost_img, img_neg, self._k).sum() + sum_violations(cost_cap, cap_neg, self._k).sum()
        return reduce_total(total, m, self.reduction)
