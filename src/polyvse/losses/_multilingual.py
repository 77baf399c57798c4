"""Shared argument checks for the multilingual losses (captions given as {language: (n, d) tensor})."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import nn

from .hinge import HingeRankingLoss


def select_languages(
    captions: Mapping[str, torch.Tensor], languages: Sequence[str] | None, n: int | None, where: str
) -> list[str]:
    """The languages to use, in order: `languages` if given (each must be present), else the dict's order.

    Every selected tensor must be (n, d) with row i describing image i of the batch (same n for all).
    """
    if not isinstance(captions, Mapping):
        raise TypeError(f"{where}: captions must be a mapping language -> (n, d) tensor, got {type(captions).__name__}")
    chosen = list(captions) if languages is None else list(languages)
    missing = [lang for lang in chosen if lang not in captions]
    if missing:
        raise KeyError(f"{where}: no caption embeddings for language(s) {missing}; batch has {sorted(captions)}")
    for lang in chosen:
        x = captions[lang]
        if x.dim() != 2:
            raise ValueError(f"{where}: captions[{lang!r}] must be (n, d), got {tuple(x.shape)}")
        if n is None:
            n = x.shape[0]
        if x.shape[0] != n:
            raise ValueError(
                f"{where}: captions[{lang!r}] has {x.shape[0]} rows, expected {n} "
                "(one caption per image of the batch, row i describing image i)"
            )
    return chosen


class MultilingualRankingLoss(nn.Module):
    """Shared constructor of the losses that rank captions of several languages with one hinge (PIVOT,
    PARALLEL): a similarity, an optional language list, and the hinge's margin / negative selection."""

    def __init__(
        self,
        similarity: nn.Module,
        margin: float = 0.2,
        languages: Sequence[str] | None = None,
        max_violation: bool = False,
        top_k: int | None = None,
        reduction: str = "sum",
    ):
        super().__init__()
        self.similarity = similarity
        self.languages = None if languages is None else list(languages)
        self.ranking = HingeRankingLoss(margin, max_violation=max_violation, top_k=top_k, reduction=reduction)

    @property
    def margin(self) -> float:
        return self.ranking.margin
