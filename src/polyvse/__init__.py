"""polyvse: multilingual image-text retrieval in one embedding space."""

from ._version import __version__

__all__ = ["__version__", "load"]


def load(path, device="auto", squash_photos=None, zero_shot=None):
    """Load a checkpoint folder as a PolyvseModel (encode_text, encode_image, similarity) on ``device``:
    auto (CUDA when available, else CPU), cpu, cuda or cuda:N. ``squash_photos`` True/False overrides how
    photos that are not square are fitted (squashed / aspect kept + centre crop); None: as the model trained.
    ``zero_shot``: the part a language the towers read but the model has none for borrows ("mean", a trained
    language's code, or "off"; None: polyvse.adaptation.ZERO_SHOT_DEFAULT)."""
    from .model.loading import load as _load

    return _load(path, device=device, squash_photos=squash_photos, zero_shot=zero_shot)
