"""Text processing: per-language tokenization and vocabularies."""

from .tokenize import tokenize
from .vocab import Vocabulary

__all__ = ["tokenize", "Vocabulary"]
