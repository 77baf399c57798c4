"""polyvse: multilingual image-text retrieval in one embedding space."""

from ._version import __version__

__all__ = ["__version__", "load"]


def load(path, device="auto"):
    """Load a checkpoint folder as a PolyvseModel (encode_text, encode_image, similarity) on ``device``:
    auto (CUDA when available, else CPU), cpu, cuda or cuda:N."""
    from .api import load as _load

    return _load(path, device=device)
