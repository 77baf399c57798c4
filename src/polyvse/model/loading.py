"""Loading a checkpoint folder as a model: :func:`load` (the torch model, text and photos: ``polyvse.load``) and
:func:`query_model` (the torch-free text-only model where one covers the checkpoint). Either takes how photos meet the
backbone (``squash_photos``) when it loads, so no caller changes a loaded model's checkpoint."""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from .checkpoint import is_pretrained_text

if TYPE_CHECKING:
    import torch

    from .numpy_serving.text_query import NumpyQueryModel
    from .torch_model import PolyvseModel

__all__ = ["load", "query_model"]


def load(path: str | os.PathLike, device: str | torch.device = "auto",
         squash_photos: bool | None = None, zero_shot: str | None = None) -> PolyvseModel:
    """A checkpoint folder as a PolyvseModel on ``device``: auto (CUDA when available, else CPU), cpu, cuda or
    cuda:N. Weights load on the CPU first, so a checkpoint written on a GPU loads on a CPU-only machine.
    ``squash_photos``: how photos that are not square meet the backbone, squashed to a square (True) or resized
    with their aspect ratio kept and centre-cropped (False); None: as the model trained (its checkpoint says).
    ``zero_shot``: the part a language the towers read but the model did not train on borrows -- "mean" of the
    trained languages' parts, one trained language's code, or "off" to refuse such languages; None:
    ``polyvse.model.parts.ZERO_SHOT_DEFAULT``."""
    from .checkpoint import load_checkpoint
    from .torch_model import PolyvseModel

    ck = load_checkpoint(Path(path))
    if squash_photos is not None:
        ck.squash_photos = bool(squash_photos)
    return PolyvseModel(ck, device=device, zero_shot=zero_shot)


def query_model(path: str | os.PathLike, zero_shot: str | None = None,
                squash_photos: bool | None = None) -> NumpyQueryModel | None:
    """The torch-free text model of a checkpoint folder (word-level or frozen towers), or None where only
    :func:`load` serves it. ``squash_photos`` as in :func:`load` (it names the model an index was built with)."""
    from .numpy_serving.text_query import TextQueryModel
    from .numpy_serving.tower_query import TowerQueryModel

    model = TowerQueryModel.load(path, zero_shot) if is_pretrained_text(path) else TextQueryModel.load(path)
    if model is not None and squash_photos is not None:
        model.checkpoint.squash_photos = bool(squash_photos)
    return model
