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


class MlpImageHead(nn.Module):
    """MULE's / EmbN's image branch: "a pair of fully connected layers with output sizes 2048 and 512 ...
    separated with a ReLU non-linearity and use batch normalization" (MULE supplementary).

    Linear(in, hidden) -> BatchNorm1d -> ReLU -> Linear(hidden, embed). Where the batch norm sits is not
    stated; after the first layer (before the ReLU) is EmbN's placement (Wang et al.'s two-branch code).
    In eval mode BatchNorm uses its running statistics, so single images embed deterministically.
    """

    def __init__(self, in_dim: int, embed_dim: int, hidden_dim: int = 2048):
        super().__init__()
        self.fc1 = nn.Linear(in_dim, hidden_dim)
        self.bn = nn.BatchNorm1d(hidden_dim)
        self.fc2 = nn.Linear(hidden_dim, embed_dim)

    def forward(self, feats: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.bn(self.fc1(feats))))
