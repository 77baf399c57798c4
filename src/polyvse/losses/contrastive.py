"""Symmetric InfoNCE over in-batch negatives (the contrastive loss of CLIP, van den Oord et al.'s InfoNCE), with
the hard-negative weighting of HN-NCE (Radenovic et al. 2023) as an option."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class InfoNceLoss(nn.Module):
    """scores[i, j] = s(image_i, caption_j) for a batch of distinct photos; the diagonal holds the positives.

    loss = (CE(scores / t, diag) over rows + CE(scores.T / t, diag) over rows) / 2, averaged over the batch:
    each image picks its caption among the batch's captions and each caption its image, by a softmax at
    temperature t. Unlike the hinge, every negative keeps a gradient in proportion to how close it is, so large
    batches and easy negatives still teach something (and there is no margin to tune, only t).

    ``hard_negative_beta`` b > 0 is HN-NCE (Radenovic et al. 2023, "Filtering, distillation, and hard negatives for
    vision-language pre-training"): each negative j of row i enters the softmax's denominator weighted by
    w_ij = (n - 1) softmax_{j != i}(b * scores[i, j] / t), so the weights average 1 and the negatives closest to
    the anchor count more; b = 0 is plain InfoNCE. The weights are importance weights of a sampling distribution,
    so they carry no gradient (detached); the positive keeps weight 1.
    """

    def __init__(self, temperature: float = 0.05, hard_negative_beta: float = 0.0):
        super().__init__()
        if not temperature > 0:
            raise ValueError(f"temperature must be positive, got {temperature!r}")
        if not hard_negative_beta >= 0:
            raise ValueError(f"hard_negative_beta must be 0 (plain InfoNCE) or positive, got {hard_negative_beta!r}")
        self.temperature = float(temperature)
        self.hard_negative_beta = float(hard_negative_beta)

    def forward(self, scores: torch.Tensor) -> torch.Tensor:
        if scores.dim() != 2 or scores.shape[0] != scores.shape[1]:
            raise ValueError(f"scores must be a square (batch, batch) matrix, got {tuple(scores.shape)}")
        # at least fp32 logits, whatever autocast made of the scores
        logits = scores.to(torch.promote_types(scores.dtype, torch.float32)) / self.temperature
        target = torch.arange(scores.shape[0], device=scores.device)
        rows, cols = logits, logits.T
        if self.hard_negative_beta > 0 and scores.shape[0] > 1:
            rows, cols = rows + self.log_weights(rows), cols + self.log_weights(cols)
        return (F.cross_entropy(rows, target) + F.cross_entropy(cols, target)) / 2

    def log_weights(self, logits: torch.Tensor) -> torch.Tensor:
        """log w_ij of HN-NCE for each row's negatives, 0 on the diagonal (the positive), no gradient."""
        n = logits.shape[0]
        diagonal = torch.eye(n, dtype=torch.bool, device=logits.device)
        with torch.no_grad():
            tilted = (self.hard_negative_beta * logits).masked_fill(diagonal, float("-inf"))
            log_w = math.log(n - 1) + tilted - torch.logsumexp(tilted, dim=1, keepdim=True)
            return log_w.masked_fill(diagonal, 0.0)

    def extra_repr(self) -> str:
        return f"temperature={self.temperature}, hard_negative_beta={self.hard_negative_beta}"
