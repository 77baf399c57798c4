"""MULE multi-layer neighbourhood constraints: sentences of the same image, in any language, embed near each other."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import torch
from torch import nn

from ..similarity import CosineSimilarity
from .hinge import REDUCTIONS, reduce_total, resolve_top_k, sum_violations


def image_labels(image_ids: torch.Tensor | Sequence[Hashable], device: torch.device | None = None) -> torch.Tensor:
    """Integer group labels (n,) from a tensor of ids or a sequence of hashable ids (e.g. photo id strings)."""
    if isinstance(image_ids, torch.Tensor):
        if image_ids.dim() != 1:
            raise ValueError(f"image_ids must be 1-D, got shape {tuple(image_ids.shape)}")
        return image_ids.to(device) if device is not None else image_ids
    index: dict[Hashable, int] = {}
    return torch.tensor([index.setdefault(x, len(index)) for x in image_ids], dtype=torch.long, device=device)


class NeighbourhoodConstraintLoss(nn.Module):
    """MULE (Kim et al. 2020) multi-layer neighbourhood constraints, Eq. 1, summed over layers:

        L_LM = sum_layers sum_anchors i  sum_{top-K triplets (i, i+, i-)} [m - s(x_i, x_i+) + s(x_i, x_i-)]_+

    With MULE's cosine distance d = 1 - cos this is exactly max(0, d(x_i, x_i+) - d(x_i, x_i-) + m).
    Each layer is an (n, d_l) tensor of the SAME n sentences (MULE: the mean-pooled MULE features u_i and
    the multimodal sentence embeddings s_i); ``image_ids[i]`` names the image sentence i describes.
    Positives of anchor i: every other sentence of the same image, in any language (same language included:
    "Positive and negative pairs may be from any language"); negatives: every sentence of another image.

    Choices where the paper is open:
    - "we enumerate all positive and negative pairs in a minibatch and use the top K most violated
      constraints" (K = 10): taken per anchor, over all of its (positive, negative) pairs, as in the
      two-branch-network code of Wang et al. that MULE follows. (That code also keeps only the farthest
      positive; enumerating all pairs, as MULE's text says, is what we do. With one positive they agree.)
      ``top_k=None`` keeps every triplet; the top-K selection is exact but only looks at each anchor's K
      farthest positives x K nearest negatives (no (n, n, n) tensor is built).
    - Margin: not stated in MULE; default 0.05 (Wang et al.'s code). ``margin`` may be one float for all
      layers (Eq. 1 uses one m) or one per layer.
    - Reduction: "sum" (default) over anchors and kept triplets; "mean" divides each layer by n. (Wang et
      al.'s code averages over n*K slots, i.e. "mean" / K: fold that into the loss weight.)
    - Anchors without any positive or negative in the batch contribute 0.
    """

    def __init__(
        self,
        margin: float | Sequence[float] = 0.05,
        top_k: int | None = 10,
        similarity: nn.Module | None = None,
        reduction: str = "sum",
    ):
        super().__init__()
        if reduction not in REDUCTIONS:
            raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
        self.margin = margin
        self.top_k = resolve_top_k(False, top_k)
        self.similarity = similarity if similarity is not None else CosineSimilarity()
        self.reduction = reduction

    def _margins(self, n_layers: int) -> list[float]:
        if isinstance(self.margin, (int, float)):
            return [float(self.margin)] * n_layers
        margins = [float(m) for m in self.margin]
        if len(margins) != n_layers:
            raise ValueError(f"got {len(margins)} margins for {n_layers} layers")
        return margins

    def layer_loss(self, x: torch.Tensor, labels: torch.Tensor, margin: float) -> torch.Tensor:
        """Eq. 1 on one layer: x (n, d), labels (n,)."""
        if x.dim() != 2 or x.shape[0] != labels.shape[0]:
            raise ValueError(f"layer must be (n, d) with n = {labels.shape[0]} sentences, got {tuple(x.shape)}")
        n = x.shape[0]
        scores = self.similarity(x, x)  # s(anchor i, other j)
        same = labels[:, None] == labels[None, :]
        positive = same & ~torch.eye(n, dtype=torch.bool, device=x.device)
        negative = ~same
        n_pos = int(positive.sum(1).max()) if n else 0
        n_neg = int(negative.sum(1).max()) if n else 0
        if n_pos == 0 or n_neg == 0:
            return scores.sum() * 0
        k = self.top_k
        kp = n_pos if k is None else min(k, n_pos)
        kn = n_neg if k is None else min(k, n_neg)
        with torch.no_grad():  # which positives are farthest / negatives nearest (ranking only)
            ip = scores.masked_fill(~positive, float("inf")).topk(kp, dim=1, largest=False).indices
            ineg = scores.masked_fill(~negative, float("-inf")).topk(kn, dim=1, largest=True).indices
        s_pos, v_pos = scores.gather(1, ip), positive.gather(1, ip)  # (n, kp)
        s_neg, v_neg = scores.gather(1, ineg), negative.gather(1, ineg)  # (n, kn)
        cost = (margin - s_pos[:, :, None] + s_neg[:, None, :]).clamp(min=0)  # (n, kp, kn)
        valid = v_pos[:, :, None] & v_neg[:, None, :]
        total = sum_violations(cost.reshape(n, -1), valid.reshape(n, -1), k).sum()
        return reduce_total(total, n, self.reduction)

    def forward(
        self, layers: torch.Tensor | Sequence[torch.Tensor], image_ids: torch.Tensor | Sequence[Hashable]
    ) -> torch.Tensor:
        if isinstance(layers, torch.Tensor):
            layers = [layers]
        layers = list(layers)
        if not layers:
            raise ValueError("NeighbourhoodConstraintLoss: no layers given")
        labels = image_labels(image_ids, layers[0].device)
        terms = [self.layer_loss(x, labels, m) for x, m in zip(layers, self._margins(len(layers)))]
        return torch.stack(terms).sum()
