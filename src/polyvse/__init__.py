"""polyvse: multilingual image-text retrieval in one embedding space."""

__version__ = "0.1.0"


def load(path):
    """Load a checkpoint folder as a PolyvseModel (encode_text, encode_image, similarity)."""
    from .api import load as _load

    return _load(path)
