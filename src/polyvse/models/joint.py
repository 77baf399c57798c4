"""The joint embedding model: an image head and a text encoder meeting in one space under a similarity."""
from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn

from ..similarity import CosineSimilarity
from .image_head import LinearImageHead
from .text_encoder import GruTextEncoder


@dataclass
class ModelConfig:
    vocab_size: int
    image_dim: int
    embed_dim: int = 1024
    word_dim: int = 300
    hidden_dim: int = 1024
    num_layers: int = 1
    bidirectional: bool = False
    dropout: float = 0.0
    text_encoder: str = "gru"
    image_head: str = "linear"
    similarity: str = "cosine"

    def to_dict(self) -> dict:
        return asdict(self)


SIMILARITIES = {"cosine": CosineSimilarity}


class JointEmbeddingModel(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        if config.text_encoder != "gru":
            raise ValueError(f"unknown text_encoder {config.text_encoder!r}; available: gru")
        if config.image_head != "linear":
            raise ValueError(f"unknown image_head {config.image_head!r}; available: linear")
        if config.similarity not in SIMILARITIES:
            raise ValueError(f"unknown similarity {config.similarity!r}; available: {', '.join(SIMILARITIES)}")
        self.config = config
        self.text_encoder = GruTextEncoder(config.vocab_size, config.word_dim, config.hidden_dim,
                                           config.embed_dim, config.num_layers, config.bidirectional,
                                           config.dropout)
        self.image_head = LinearImageHead(config.image_dim, config.embed_dim)
        self.similarity = SIMILARITIES[config.similarity]()

    def encode_text_ids(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return self.text_encoder(ids, lengths)

    def encode_image_features(self, feats: torch.Tensor) -> torch.Tensor:
        return self.image_head(feats)

    def forward(self, feats: torch.Tensor, ids: torch.Tensor, lengths: torch.Tensor):
        """(image embeddings, text embeddings) of a batch; the entry point DDP wraps."""
        return self.encode_image_features(feats), self.encode_text_ids(ids, lengths)

    def scores(self, images: torch.Tensor, texts: torch.Tensor) -> torch.Tensor:
        return self.similarity(images, texts)
