"""What the light install (``pip install polyvse``) leaves out: the ``[train]`` extra's packages, and the one message a
command that needs one of them gives there instead of a traceback."""

from __future__ import annotations

__all__ = ["INSTALL", "TRAIN_EXTRA", "missing_extra", "needs_extra_message"]

INSTALL = "pip install 'polyvse[train]'"

#: top-level module -> what the message calls it, for the packages only the [train] extra installs
TRAIN_EXTRA = {
    "torch": "PyTorch",
    "torchvision": "torchvision",
    "efficientnet_lite_pytorch": "the EfficientNet-Lite backbones",
    "onnx": "onnx",
    "sacrebleu": "sacrebleu",
    "matplotlib": "matplotlib",
}


def missing_extra(exc: ModuleNotFoundError) -> str | None:
    """What the [train] extra would have provided for ``exc`` (None: a module it does not install)."""
    return TRAIN_EXTRA.get((exc.name or "").split(".")[0])


def needs_extra_message(command: str, what: str = "PyTorch") -> str:
    return f"polyvse {command} needs {what}, which the light install leaves out: {INSTALL}"
