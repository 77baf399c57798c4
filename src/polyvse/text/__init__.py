"""Text processing: per-language tokenization and vocabularies."""

from ..util.lazy import lazy_attributes

# on first use: the tokenizer imports `regex`, which a query of a model with pretrained towers never needs
__getattr__ = lazy_attributes(__name__, {"tokenize": ".tokenize", "Vocabulary": ".vocab"})

__all__ = ["tokenize", "Vocabulary"]
