"""The learned part of a frozen-sentence-encoder text branch: a head on precomputed embeddings."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["FrozenSentenceEncoderHead"]


class FrozenSentenceEncoderHead(nn.Module):
    """Frozen sentence embeddings (n, in_dim) -> joint space (n, embed_dim).

    ``hidden=None``: one linear layer (Xavier-uniform, zero bias, as the image head).
    ``hidden=H``: Linear(in_dim, H) -> ReLU -> Dropout -> Linear(H, embed_dim).
    The output is not normalised: the similarity (cosine, order) decides that, as for the other
    text encoders. The encoder itself stays outside the graph: train on cached vectors
    (:func:`polyvse.modules.pretrained.encode_cached`), so no gradient ever reaches it.
    """

    def __init__(self, in_dim: int, embed_dim: int, hidden: int | None = None, dropout: float = 0.0):
        super().__init__()
        if in_dim < 1 or embed_dim < 1 or (hidden is not None and hidden < 1):
            raise ValueError(f"dimensions must be positive: in_dim={in_dim}, embed_dim={embed_dim}, hidden={hidden}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.in_dim, self.embed_dim, self.hidden = int(in_dim), int(embed_dim), hidden
        if hidden is None:
            self.net = nn.Linear(in_dim, embed_dim)
        else:
            self.net = nn.Sequential(
                nn.Linear(in_dim, hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, embed_dim)
            )
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, emb: torch.Tensor) -> torch.Tensor:
        if emb.dim() != 2 or emb.shape[1] != self.in_dim:
            raise ValueError(f"expected embeddings of shape (n, {self.in_dim}), got {tuple(emb.shape)}")
        return self.net(emb.to(self.net_dtype))

    @property
    def net_dtype(self) -> torch.dtype:
        return next(self.parameters()).dtype

    def extra_repr(self) -> str:
        return f"in_dim={self.in_dim}, embed_dim={self.embed_dim}, hidden={self.hidden}"
