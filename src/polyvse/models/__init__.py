"""Encoders and the joint embedding model."""
from .image_head import LinearImageHead
from .text_encoder import GruTextEncoder
from .joint import JointEmbeddingModel, ModelConfig

__all__ = ["GruTextEncoder", "LinearImageHead", "JointEmbeddingModel", "ModelConfig"]
