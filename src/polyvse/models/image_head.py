"""Image branch on cached backbone features."""
from __future__ import annotations

import torch
from torch import nn


class LinearImageHead(nn.Module):
    """A linear map from pooled CNN features into the joint space (VSE, PIVOT, AME)."""

    def __init__(self, in_dim: int, embed_dim: int):
        super().__init__()
        self.fc = nn.Linear(in_dim, embed_dim)
        # Xavier init as in VSE++: keeps early scores in a useful range for the hinge margin.
        r = (6.0 / (in_dim + embed_dim)) ** 0.5
        nn.init.uniform_(self.fc.weight, -r, r)
        nn.init.zeros_(self.fc.bias)

    def forward(self, feats: torch.Tensor) -> torch.Tensor:
        return self.fc(feats)
