"""Gella et al. (2017) PARALLEL extra term: captions of the same image in different languages rank together."""

from __future__ import annotations

from collections.abc import Mapping
from itertools import combinations

import torch

from ._multilingual import MultilingualRankingLoss, select_languages


class ParallelLoss(MultilingualRankingLoss):
    """Caption-caption ranking term of Gella et al. 2017 Sec. 3.1 Eq. 2:

        loss_para - loss_pivot = sum_{(c1, c2)} ( sum_{c'1} [a - S(c1, c2) + S(c'1, c2)]_+
                                                + sum_{c'2} [a - S(c1, c2) + S(c1, c'2)]_+ )
                               = HingeRankingLoss(S(captions_l1, captions_l2))

    Symmetric in the sense of the equation: for the pair of same-image captions (c1_i, c2_i) both the
    other-image captions of language 1 (column direction) and of language 2 (row direction) are negatives.
    Gella's PARALLEL objective is ``PivotLoss(...)(images, caps) + ParallelLoss(...)(images, caps)``.

    Choices where the paper is open or that fix conventions:
    - More than two languages: the term is summed over every unordered pair {k, l} (Gella has only en, de).
    - Argument order for an asymmetric similarity: S(c_k, c_l) with k before l in ``languages`` (or in the
      batch dict's order when ``languages`` is None), i.e. like Gella's S(c1, c2) with c1 = English first:
      the earlier language takes the "specific" (first) slot of OrderSimilarity.
    - Negatives: all other in-batch captions (same convention as PivotLoss).
    - ``images`` is accepted (and ignored) so that all multilingual losses share ``forward(images, captions)``.
    """

    def terms(
        self, captions: Mapping[str, torch.Tensor], masks: Mapping[str, torch.Tensor] | None = None
    ) -> dict[tuple[str, str], torch.Tensor]:
        """The per-pair caption-caption ranking terms {(k, l): scalar}; ``masks[lang]`` (n,) bool marks the
        images that have a caption in ``lang`` (a pair is a positive only where both exist)."""
        langs = select_languages(captions, self.languages, None, "ParallelLoss")
        masks = masks or {}
        return {
            (k, l): self.ranking(self.similarity(captions[k], captions[l]), masks.get(k), masks.get(l))
            for k, l in combinations(langs, 2)
        }

    def forward(
        self,
        images: torch.Tensor | None,
        captions: Mapping[str, torch.Tensor],
        masks: Mapping[str, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        terms = self.terms(captions, masks)
        if not terms:
            anything = next(iter(captions.values()), images)
            if anything is None:
                raise ValueError("ParallelLoss: no caption embeddings given")
            return anything.sum() * 0
        return torch.stack(list(terms.values())).sum()
