"""Symmetric similarity: cosine of L2-normalised embeddings."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class CosineSimilarity(nn.Module):
    """score(a_i, b_j) = <a_i, b_j> / (|a_i| |b_j|). Symmetric, so it is the same for image->text and text->image."""

    name = "cosine"

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(x, dim=-1)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return self.normalize(a) @ self.normalize(b).T

    def paired(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """Scores of aligned rows: score(a_i, b_i) -> (n,)."""
        return (self.normalize(a) * self.normalize(b)).sum(-1)
