"""Encoders and the joint embedding model.

Names are imported on first use (PEP 562), so that ``polyvse.models.config`` and ``polyvse.models.numpy_text``
load without torch: a text query from the command line never needs it.
"""
import importlib

_WHERE = {"LinearImageHead": ".image_head", "MlpImageHead": ".image_head", "GruTextEncoder": ".text_encoder",
          "TextEncoder": ".text_encoder", "JointEmbeddingModel": ".joint", "ModelConfig": ".config"}

__all__ = ["GruTextEncoder", "LinearImageHead", "MlpImageHead", "JointEmbeddingModel", "ModelConfig",
           "TextEncoder"]


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_WHERE[name], __name__), name)
    globals()[name] = value
    return value
