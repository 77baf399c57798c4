"""Similarity functions between embedding sets: score(a, b) -> (len(a), len(b)) matrix, imported on first use
(CSLS, the hubness-corrected score on top of the cosine, is :mod:`polyvse.csls`)."""

from ..util.lazy import lazy_attributes

__all__ = ["CosineSimilarity", "OrderSimilarity"]

__getattr__ = lazy_attributes(__name__, {"CosineSimilarity": ".cosine", "OrderSimilarity": ".order"})
