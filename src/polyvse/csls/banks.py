"""Hubness correction at retrieval time: cross-domain similarity local scaling (CSLS) between photos and captions.

In a learned image-text space some photos are "hubs", close to many captions, and win queries they do not match
(Radovanovic et al. 2010). CSLS (Conneau et al. 2018, the score behind RCSLS) discounts every item by how close
it already is to its neighbourhood of the other modality::

    score(i, c) = 2 cos(i, c) - r_C(i) - r_I(c)
    r_C(i) = mean cosine of photo i to its k nearest captions of the query's language in the caption bank
    r_I(c) = mean cosine of caption c to its k nearest photos in the photo bank

The banks are fixed reference sets -- the universal embeddings of TRAINING photos and of training captions (one
bank per language, written into the checkpoint when training ends) -- so the score of a pair never depends on
what else is in the gallery or the query batch: nothing of an evaluation split enters them (not transductive).
A language with no bank of its own (one taught after training) uses the pooled bank of every language's
captions. For text->image retrieval only r_C moves the ranking (r_I is one constant per query). The formula, the
neighbour means and the choice of bank are written once, for torch and numpy alike, in
:mod:`polyvse.csls.scoring`; this class holds the banks as torch tensors, and
``polyvse.csls.search.SearchHubness`` as numpy arrays for the torch-free search path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from .scoring import POOLED, bank_key, csls, knn_mean

__all__ = ["HubnessBanks", "POOLED"]


def _as_tensor(x: Any) -> torch.Tensor:
    return x.detach() if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x))


def _unit_rows(x: Any) -> torch.Tensor:
    return F.normalize(_as_tensor(x).float(), dim=-1)


class HubnessBanks:
    """The reference sets of CSLS scoring and its ``k``: ``photos`` (n_p, d) and ``captions`` {language: (n_c, d)}
    embeddings (any scale: rows are normalised here; kept as float16 to keep checkpoints small)."""

    def __init__(self, photos: Any, captions: Mapping[str, Any], k: int = 10, *, stored: bool = False):
        """``stored``: the rows are a checkpoint's (unit, float16), taken as they are (the numpy search path reads
        the same rows, so both score with the same banks)."""
        if isinstance(k, bool) or int(k) != k or k < 1:
            raise ValueError(f"csls k must be a positive integer, got {k!r}")
        self.k = int(k)

        def bank(x: Any) -> torch.Tensor:
            return _as_tensor(x).half() if stored else _unit_rows(x).half()

        self.photos = bank(photos)
        if self.photos.ndim != 2 or self.photos.shape[0] < self.k:
            raise ValueError(
                f"the photo bank needs at least k={self.k} rows of embeddings, got shape {tuple(self.photos.shape)}"
            )
        self.captions = {str(lang): bank(v) for lang, v in captions.items() if lang != POOLED}
        if not self.captions:
            raise ValueError("the caption bank is empty: CSLS needs captions of at least one language")
        for lang, rows in self.captions.items():
            if rows.ndim != 2 or rows.shape[1] != self.photos.shape[1] or rows.shape[0] < self.k:
                raise ValueError(
                    f"caption bank {lang!r}: shape {tuple(rows.shape)}; needs at least k={self.k} "
                    f"rows of the photo bank's width {self.photos.shape[1]}"
                )
        self._pooled = torch.cat(list(self.captions.values()))

    def with_k(self, k: int) -> HubnessBanks:
        """The same banks scored with ``k`` neighbours."""
        return HubnessBanks(self.photos, self.captions, k, stored=True)

    @property
    def dim(self) -> int:
        return int(self.photos.shape[1])

    @property
    def languages(self) -> list[str]:
        return sorted(self.captions)

    def caption_bank(self, lang: str | None) -> torch.Tensor:
        """The bank of ``lang``'s captions, the pooled bank for a language without one (or ``None``)."""
        key = bank_key(lang, self.captions)
        return self._pooled if key == POOLED else self.captions[key]

    def _check(self, emb: torch.Tensor, what: str) -> torch.Tensor:
        if emb.ndim != 2 or emb.shape[1] != self.dim:
            raise ValueError(f"{what} of shape {tuple(emb.shape)} do not fit banks of width {self.dim}")
        return emb

    def photo_penalty(self, image_emb: Any, lang: str | None) -> torch.Tensor:
        """r_C: each photo's mean cosine to its k nearest bank captions of ``lang`` -> (n_images,)."""
        img = self._check(_unit_rows(image_emb), "image embeddings")
        return knn_mean(img, self.caption_bank(lang).float(), self.k)

    def caption_penalty(self, text_emb: Any) -> torch.Tensor:
        """r_I: each caption's mean cosine to its k nearest bank photos -> (n_texts,)."""
        txt = self._check(_unit_rows(text_emb), "text embeddings")
        return knn_mean(txt, self.photos.float(), self.k)

    def scores(self, image_emb: Any, text_emb: Any, lang: str | None) -> torch.Tensor:
        """The (n_images, n_texts) CSLS matrix of photos against captions in ``lang``."""
        img = self._check(_unit_rows(image_emb), "image embeddings")
        txt = self._check(_unit_rows(text_emb), "text embeddings")
        with torch.no_grad():
            return csls(img @ txt.T, self.photo_penalty(img, lang)[:, None], self.caption_penalty(txt)[None, :])

    # -- checkpoint form: tensors in the weights file (polyvse.model.checkpoint.hubness_tensors), sizes in config.json
    def describe(self) -> dict:
        return {
            "k": self.k,
            "photos": int(self.photos.shape[0]),
            "captions": {lang: int(b.shape[0]) for lang, b in sorted(self.captions.items())},
        }
