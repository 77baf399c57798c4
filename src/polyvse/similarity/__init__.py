"""Similarity functions between embedding sets: score(a, b) -> (len(a), len(b)) matrix."""
from .cosine import CosineSimilarity

__all__ = ["CosineSimilarity"]
