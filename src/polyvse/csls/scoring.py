"""CSLS between photos and captions, written once for numpy arrays and torch tensors alike (this module imports no
torch): the definition behind ``polyvse.csls.banks.HubnessBanks`` (torch: training, evaluation,
``polyvse.load``) and ``polyvse.csls.search.SearchHubness`` (numpy: the torch-free search path), which
differ only in the arithmetic's library::

    score(i, c) = 2 cos(i, c) - r_C(i, L) - r_I(c)
    r_C(i, L) = mean cosine of photo i to its k nearest captions of the bank of L (the pooled bank of every
                language's captions for a language without one)
    r_I(c)    = mean cosine of caption c to its k nearest photos of the photo bank

Banks are unit rows kept as float16 (what a checkpoint stores) and computed with in float32.
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np

__all__ = ["POOLED", "bank_key", "csls", "knn_mean", "top_k_mean", "top_k_values"]

#: key of the bank of every language's captions together (for languages without a bank of their own)
POOLED = "*"


def bank_key(lang: str | None, languages: Collection[str]) -> str:
    """Which caption bank scores captions in ``lang``: its own, else (or for None) the pooled one."""
    return lang if lang is not None and lang in languages else POOLED


def top_k_values(sims: np.ndarray, k: int) -> np.ndarray:
    """Each row's ``k`` largest entries (numpy, in no order)."""
    return -np.partition(-sims, k - 1, axis=1)[:, :k]


def top_k_mean(sims, k: int):
    """Each row's mean of its ``k`` largest entries (numpy: partition; torch: topk)."""
    if isinstance(sims, np.ndarray):
        return top_k_values(sims, k).mean(axis=1)
    return sims.topk(k, dim=1).values.mean(dim=1)


def knn_mean(queries, keys, k: int, chunk_size: int = 4096):
    """Each query row's mean of its ``k`` largest dot products with the rows of ``keys`` (unit rows: r_C or r_I),
    ``chunk_size`` query rows at a time, so the similarities held at once are chunk_size x len(keys)."""
    if len(queries) <= chunk_size:
        return top_k_mean(queries @ keys.T, k)
    parts = [top_k_mean(queries[i : i + chunk_size] @ keys.T, k) for i in range(0, len(queries), chunk_size)]
    if isinstance(queries, np.ndarray):
        return np.concatenate(parts)
    import torch  # only reached with torch tensors: their caller has torch loaded already

    return torch.cat(parts)


def csls(cosines, photo_penalty, caption_penalty):
    """CSLS scores from cosines and the two penalties, broadcast as given (a (photos, captions) matrix takes
    ``photo_penalty[:, None]`` and ``caption_penalty[None, :]``)."""
    return 2.0 * cosines - photo_penalty - caption_penalty
