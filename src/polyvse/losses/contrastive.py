"""Symmetric InfoNCE over in-batch negatives (the contrastive loss of CLIP, van den Oord et al.'s InfoNCE)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class InfoNceLoss(nn.Module):
    """scores[i, j] = s(image_i, caption_j) for a batch of distinct photos; the diagonal holds the positives.

    loss = (CE(scores / t, diag) over rows + CE(scores.T / t, diag) over rows) / 2, averaged over the batch:
    each image picks its caption among the batch's captions and each caption its image, by a softmax at
    temperature t. Unlike the hinge, every negative keeps a gradient in proportion to how close it is, so large
    batches and easy negatives still teach something (and there is no margin to tune, only t).
    """

    def __init__(self, temperature: float = 0.05):
        super().__init__()
        if not temperature > 0:
            raise ValueError(f"temperature must be positive, got {temperature!r}")
        self.temperature = float(temperature)

    def forward(self, scores: torch.Tensor) -> torch.Tensor:
        if scores.dim() != 2 or scores.shape[0] != scores.shape[1]:
            raise ValueError(f"scores must be a square (batch, batch) matrix, got {tuple(scores.shape)}")
        # at least fp32 logits, whatever autocast made of the scores
        logits = scores.to(torch.promote_types(scores.dtype, torch.float32)) / self.temperature
        target = torch.arange(scores.shape[0], device=scores.device)
        return (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target)) / 2

    def extra_repr(self) -> str:
        return f"temperature={self.temperature}"
