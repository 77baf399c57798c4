"""Gella et al. (2017) PIVOT objective: the image as a pivot between languages."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from ._multilingual import MultilingualRankingLoss, select_languages


class PivotLoss(MultilingualRankingLoss):
    """Image-pivoted ranking, Gella et al. 2017 Sec. 3.1 Eq. 1:

        loss_pivot = sum_k sum_{(c_k, i)} ( sum_{c'_k} [a - S(c_k, i) + S(c'_k, i)]_+
                                           + sum_{i'}  [a - S(c_k, i) + S(c_k, i')]_+ )
                   = sum_k HingeRankingLoss(S(images, captions_k))

    i.e. for every language k, a bidirectional image-caption hinge against the one shared image space;
    there is no caption-caption term (that is ``ParallelLoss``).

    Choices where the paper is open or that fix conventions:
    - Negatives are all other in-batch items of the same language / all other images ("For each minibatch,
      we obtain invalid descriptions by selecting descriptions of other images"); ``max_violation`` /
      ``top_k`` are available as extensions but off by default.
    - Scores are ``similarity(images, captions_k)``: the image is the first argument, matching Gella Eq. 3
      ("a and b are embeddings of image and description") for the asymmetric OrderSimilarity.
    - A batch holds n distinct images and, per language, one caption per image (row i describes image i).
    - ``languages=None`` uses every language present in the batch dict; an explicit list requires each.
    Paper margins: 0.2 with cosine (PIVOT-SYM), 0.05 with order similarity (PIVOT-ASYM).
    """

    def terms(
        self,
        images: torch.Tensor,
        captions: Mapping[str, torch.Tensor],
        masks: Mapping[str, torch.Tensor] | None = None,
    ) -> dict[str, torch.Tensor]:
        """The per-language image-caption ranking terms {language: scalar}.

        ``masks[lang]`` (n,) bool marks the images that have a caption in ``lang`` (rows of missing captions
        hold anything, e.g. zeros): such a photo is no positive for that language and its empty slot no
        negative, while its image still serves as a negative for the language's captions.
        """
        if images.dim() != 2:
            raise ValueError(f"PivotLoss: images must be (n, d), got {tuple(images.shape)}")
        langs = select_languages(captions, self.languages, images.shape[0], "PivotLoss")
        masks = masks or {}
        return {lang: self.ranking(self.similarity(images, captions[lang]), None, masks.get(lang)) for lang in langs}

    def forward(
        self,
        images: torch.Tensor,
        captions: Mapping[str, torch.Tensor],
        masks: Mapping[str, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        terms = self.terms(images, captions, masks)
        if not terms:
            return images.sum() * 0
        return torch.stack(list(terms.values())).sum()
