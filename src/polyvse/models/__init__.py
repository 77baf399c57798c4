"""Encoders and the joint embedding model."""
from .image_head import LinearImageHead, MlpImageHead
from .text_encoder import GruTextEncoder, TextEncoder
from .joint import JointEmbeddingModel, ModelConfig

__all__ = ["GruTextEncoder", "LinearImageHead", "MlpImageHead", "JointEmbeddingModel", "ModelConfig",
           "TextEncoder"]
