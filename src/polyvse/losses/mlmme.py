"""Calixto & Liu MLMME objective: beta * multimodal ranking + (1 - beta) * multilingual ranking."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import nn

from ..similarity import CosineSimilarity
from .parallel import ParallelLoss
from .pivot import PivotLoss


class MlmmeLoss(nn.Module):
    """Calixto & Liu, "Sentence-level multilingual multi-modal embedding", Eq. 1-3:

        loss = beta * R_MM + (1 - beta) * R_ML,  0 <= beta <= 1
        R_MM = sum_k  sum_d sum_r [a - S(d, v^k) + S(d, v^k_r)]_+ + sum_{v^k} sum_r [a - S(v^k, d) + S(v^k, d_r)]_+
             = sum_k HingeRankingLoss(S(images, captions_k))                 (image-sentence, both directions)
        R_ML = sum_{k<l} sum_{v^k} sum_r [a - S(v^k, v^l) + S(v^k, v^l_r)]_+ + sum_{v^l} sum_r [a - S(v^l, v^k) + S(v^l, v^k_r)]_+
             = sum_{k<l} HingeRankingLoss(S(captions_k, captions_l))          (sentence-sentence, both directions)

    R_MM is computed by ``PivotLoss`` and R_ML by ``ParallelLoss`` (same terms, different weights).

    Choices where the paper is open:
    - Similarity: the paper writes a dot product d^T v; following the VSE model it extends (Kiros et al.,
      unit-normalised embeddings) and its own use of cosine for STS, the default is ``CosineSimilarity``
      (= d^T v on normalised vectors). Pass another similarity to change it.
    - "Random" contrastive sentences/images: all other in-batch items are the negatives (VSE practice).
    - Eq. 2 ranges over k, l in K with l != k while each summand already holds both directions; summing
      over ordered pairs would count every pair twice, so R_ML sums over unordered pairs {k, l} (for the
      paper's en-de setting: exactly one pair, both directions). The doubled reading is a rescaling of beta.
    - Margin: not given in the paper; default 0.2 (the VSE default).
    """

    def __init__(
        self,
        beta: float,
        margin: float = 0.2,
        similarity: nn.Module | None = None,
        languages: Sequence[str] | None = None,
        max_violation: bool = False,
        top_k: int | None = None,
        reduction: str = "sum",
    ):
        super().__init__()
        if not 0.0 <= float(beta) <= 1.0:
            raise ValueError(f"beta must lie in [0, 1], got {beta}")
        self.beta = float(beta)
        self.similarity = similarity if similarity is not None else CosineSimilarity()
        kw = dict(languages=languages, max_violation=max_violation, top_k=top_k, reduction=reduction)
        self.multimodal = PivotLoss(self.similarity, margin, **kw)  # R_MM
        self.multilingual = ParallelLoss(self.similarity, margin, **kw)  # R_ML

    @property
    def margin(self) -> float:
        return self.multimodal.margin

    def parts(
        self,
        images: torch.Tensor,
        captions: Mapping[str, torch.Tensor],
        masks: Mapping[str, torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(R_MM, R_ML), unweighted; ``masks`` as in PivotLoss / ParallelLoss."""
        return self.multimodal(images, captions, masks), self.multilingual(images, captions, masks)

    def forward_with_parts(
        self,
        images: torch.Tensor,
        captions: Mapping[str, torch.Tensor],
        masks: Mapping[str, torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """(the loss, {"r_mm": R_MM, "r_ml": R_ML}) for logging the two terms."""
        r_mm, r_ml = self.parts(images, captions, masks)
        return self.beta * r_mm + (1.0 - self.beta) * r_ml, {"r_mm": r_mm, "r_ml": r_ml}

    def forward(
        self,
        images: torch.Tensor,
        captions: Mapping[str, torch.Tensor],
        masks: Mapping[str, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        return self.forward_with_parts(images, captions, masks)[0]

    def caption_caption(
        self, captions: Mapping[str, torch.Tensor], masks: Mapping[str, torch.Tensor] | None = None
    ) -> torch.Tensor:
        """(1 - beta) * R_ML alone: the term of caption tuples that have no image (text-only corpora)."""
        return (1.0 - self.beta) * self.multilingual(None, captions, masks)
