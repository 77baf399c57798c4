"""Similarity functions between embedding sets: score(a, b) -> (len(a), len(b)) matrix."""
from .cosine import CosineSimilarity
from .order import OrderSimilarity

__all__ = ["CosineSimilarity", "OrderSimilarity"]
