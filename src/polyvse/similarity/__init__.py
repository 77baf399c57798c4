"""Similarity functions between embedding sets: score(a, b) -> (len(a), len(b)) matrix. Imported on first use, so
the torch-free CSLS definition (``csls_scoring``) can be imported without torch."""
from ..util.lazy import lazy_attributes

__all__ = ["CosineSimilarity", "OrderSimilarity"]

__getattr__ = lazy_attributes(__name__, {"CosineSimilarity": ".cosine", "OrderSimilarity": ".order"})
