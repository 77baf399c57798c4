"""Bidirectional hinge ranking loss over in-batch negatives (VSE; max-violation as in VSE++)."""
from __future__ import annotations

import torch
from torch import nn


class HingeRankingLoss(nn.Module):
    """scores[i, j] = s(image_i, caption_j) for a batch of distinct photos; the diagonal holds the positives.

    loss = sum_i sum_{j != i} [margin - s_ii + s_ij]_+  (image -> caption negatives)
         + sum_i sum_{j != i} [margin - s_ii + s_ji]_+  (caption -> image negatives)
    With `max_violation=True` only the hardest negative of each row/column counts (VSE++).
    """

    def __init__(self, margin: float = 0.2, max_violation: bool = False):
        super().__init__()
        self.margin = margin
        self.max_violation = max_violation

    def forward(self, scores: torch.Tensor) -> torch.Tensor:
        if scores.dim() != 2 or scores.shape[0] != scores.shape[1]:
            raise ValueError(f"scores must be a square (batch, batch) matrix, got {tuple(scores.shape)}")
        pos = scores.diag()
        cost_caption = (self.margin - pos[:, None] + scores).clamp(min=0)  # row i: image i vs captions j
        cost_image = (self.margin - pos[None, :] + scores).clamp(min=0)  # column j: caption j vs images i
        eye = torch.eye(scores.shape[0], dtype=torch.bool, device=scores.device)
        cost_caption = cost_caption.masked_fill(eye, 0)
        cost_image = cost_image.masked_fill(eye, 0)
        if self.max_violation:
            return cost_caption.max(dim=1).values.sum() + cost_image.max(dim=0).values.sum()
        return cost_caption.sum() + cost_image.sum()
