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

__all__ = ["load", "photo_model", "query_model", "uses_torch"]


def load(
    path: str | os.PathLike,
    device: str | torch.device = "auto",
    squash_photos: bool | None = None,
    zero_shot: str | None = None,
) -> PolyvseModel:
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


def query_model(
    path: str | os.PathLike, zero_shot: str | None = None, squash_photos: bool | None = None
) -> NumpyQueryModel | None:
    """The torch-free text model of a checkpoint folder (word-level or frozen towers), or None where only
    :func:`load` serves it. ``squash_photos`` as in :func:`load` (it names the model an index was built with)."""
    from .numpy_serving.text_query import TextQueryModel
    from .numpy_serving.tower_query import TowerQueryModel

    model = TowerQueryModel.load(path, zero_shot) if is_pretrained_text(path) else TextQueryModel.load(path)
    if model is not None and squash_photos is not None:
        model.checkpoint.squash_photos = bool(squash_photos)
    return model


def uses_torch(device: str = "auto") -> bool:
    """Whether :func:`photo_model` loads the torch model on ``device``: $POLYVSE_IMAGE_ENCODER=torch, or (auto) torch
    is installed or a device other than the CPU is asked for."""
    from ..features.onnx_encoder import encoder_choice, torch_installed

    choice = encoder_choice()
    return choice == "torch" or (choice == "auto" and (torch_installed() or str(device) not in ("auto", "cpu")))


class OnnxDevice:
    """What a model embedding photos through ONNX Runtime reports as its device (the CPU, no torch.device)."""

    type = "cpu"

    def __str__(self) -> str:
        return "cpu (ONNX Runtime)"


def photo_model(
    path: str | os.PathLike, device: str = "auto", squash_photos: bool | None = None, zero_shot: str | None = None
):
    """The model that embeds photos and text for an index (build, add, photo search, the service): :func:`load`
    where torch is installed (or a device other than the CPU is asked for), else the numpy text model
    (:func:`query_model`) with the checkpoint's ONNX image encoder (polyvse.features.onnx_encoder);
    $POLYVSE_IMAGE_ENCODER=torch or onnx forces one. Without torch, a checkpoint without the encoder is refused
    with the command that writes it."""
    from ..errors import CheckpointError
    from ..features.onnx_encoder import OnnxImageEncoder

    if uses_torch(device):
        return load(path, device=device, squash_photos=squash_photos, zero_shot=zero_shot)
    if str(device) not in ("auto", "cpu"):
        raise CheckpointError(
            f"--device {device}: the ONNX image encoder runs on the CPU; give --device cpu, or "
            "install torch (pip install 'polyvse[train]') for a GPU"
        )
    model = query_model(path, zero_shot=zero_shot, squash_photos=squash_photos)
    if model is None:
        raise CheckpointError(
            f"{path}: this checkpoint's text branch has no numpy path, so it needs torch: pip install 'polyvse[train]'"
        )
    model.image_encoder = OnnxImageEncoder(path, squash=model.checkpoint.squash_photos)
    model.device = OnnxDevice()
    return model
