"""polyvse: multilingual image-text retrieval in one embedding space."""

from ._version import __version__

__all__ = ["__version__", "load"]


def load(path, device="auto", squash_photos=None):
    """Load a checkpoint folder as a PolyvseModel (encode_text, encode_image, similarity) on ``device``:
    auto (CUDA when available, else CPU), cpu, cuda or cuda:N. ``squash_photos`` True/False overrides how
    photos that are not square are fitted (squashed / aspect kept + centre crop); None: as the model trained."""
    from .api import load as _load

    return _load(path, device=device, squash_photos=squash_photos)
