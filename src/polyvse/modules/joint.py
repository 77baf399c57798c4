"""The joint embedding model: an image head and a text encoder meeting in one space under a similarity.

Everything the model is made of is in ``ModelConfig``, so a checkpoint is rebuilt from its config.json alone
(``JointEmbeddingModel(ModelConfig(**cfg["model"]))``); fields added since the first version have defaults
that reproduce that version (shared GRU, linear head, cosine), so older checkpoints still load.
"""

from __future__ import annotations

import torch
from torch import nn

from ..device import module_device, to_device
from ..features.backbones import backbone_tail
from ..similarity import CosineSimilarity, OrderSimilarity
from .config import ModelConfig
from .image_head import LinearImageHead, MlpImageHead
from .pretrained.text_branch import PretrainedTextEncoder
from .text_encoder import ENCODERS, TextEncoder

__all__ = ["JointEmbeddingModel", "ModelConfig"]

SIMILARITIES = {"cosine": CosineSimilarity, "order": OrderSimilarity}
IMAGE_HEADS = ("linear", "mlp")


class JointEmbeddingModel(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        if config.text_encoder not in ENCODERS + ("pretrained",):
            raise ValueError(
                f"unknown text_encoder {config.text_encoder!r}; available: {', '.join(ENCODERS)}, pretrained"
            )
        if config.image_head not in IMAGE_HEADS:
            raise ValueError(f"unknown image_head {config.image_head!r}; available: {', '.join(IMAGE_HEADS)}")
        if config.similarity not in SIMILARITIES:
            raise ValueError(f"unknown similarity {config.similarity!r}; available: {', '.join(SIMILARITIES)}")
        self.config = config
        if config.text_encoder == "pretrained":  # a learned head on frozen sentence vectors
            self.text_encoder = PretrainedTextEncoder(
                config.pretrained_dim,
                config.embed_dim,
                config.text_head,
                config.hidden_dim,
                config.dropout,
                config.languages,
                config.universal_dim,
                towers=config.pretrained_towers,
                tower_dropout=config.tower_dropout,
                tail_layers=config.text_tail_layers,
            )
        else:
            self.text_encoder = TextEncoder(
                config.vocab_size,
                config.word_dim,
                config.hidden_dim,
                config.embed_dim,
                config.num_layers,
                config.bidirectional,
                config.dropout,
                cell=config.text_encoder,
                sharing=config.text_sharing,
                languages=config.languages,
                universal_dim=config.universal_dim,
                language_map=config.language_map,
            )
        # a backbone tail first (its weights come from the checkpoint, or from ImageNet when training starts)
        self.image_tail = backbone_tail(config.image_tail, config.image_tail_shape) if config.image_tail else None
        head_in = self.image_tail.out_dim if self.image_tail is not None else config.image_dim
        if config.image_head == "linear":
            self.image_head = LinearImageHead(head_in, config.embed_dim)
        else:
            self.image_head = MlpImageHead(head_in, config.embed_dim, config.image_hidden_dim)
        self.similarity = SIMILARITIES[config.similarity]()

    @property
    def needs_language(self) -> bool:
        return self.text_encoder.needs_language

    @property
    def device(self) -> torch.device:
        """Where the weights are; the encode_* methods move their inputs here (lengths stay on the CPU, where
        pack_padded_sequence wants them)."""
        return module_device(self)

    def language_indices(self, langs) -> torch.Tensor | None:
        """(batch,) language indices from a list of codes (or None when the model has no per-language parts)."""
        if langs is None or not self.needs_language:
            return None
        if isinstance(langs, torch.Tensor):
            return to_device(langs, self.device)
        index = {lang: i for i, lang in enumerate(self.config.languages)}
        unknown = sorted({lang for lang in langs if lang not in index})
        if unknown:
            raise ValueError(f"this model has per-language parts for {self.config.languages}, not {unknown}")
        return torch.tensor([index[lang] for lang in langs], dtype=torch.long, device=self.device)

    def _joint(self, x: torch.Tensor) -> torch.Tensor:
        """Order embeddings live on the unit sphere (Vendrov et al. L2-normalise both sides before the order
        score). Without it the score -||max(0, |b| - |a|)||^2 is exactly 0 for every caption that shrinks
        below an image, so a trained model scores most pairs 0 and ranking degenerates into ties. Cosine
        normalises on its own, so the embeddings of cosine models are left as they are."""
        return nn.functional.normalize(x, dim=-1) if self.config.similarity == "order" else x

    def encode_text_ids(self, ids: torch.Tensor, lengths: torch.Tensor, langs=None) -> torch.Tensor:
        """langs: None, a (batch,) index tensor, or a list of language codes (needed for per-language parts)."""
        ids = to_device(torch.as_tensor(ids), self.device)
        return self._joint(self.text_encoder(ids, lengths, self.language_indices(langs)))

    def text_features(self, ids: torch.Tensor, lengths: torch.Tensor, langs=None):
        """(sentence embeddings, per-word features before pooling) -- for word/sentence-level losses."""
        ids = to_device(torch.as_tensor(ids), self.device)
        text, words = self.text_encoder.features(ids, lengths, self.language_indices(langs))
        return self._joint(text), words

    def encode_image_features(self, feats: torch.Tensor) -> torch.Tensor:
        """Photos in the joint space, from what the checkpoint's extractor gives: pooled features, or the map
        entering a backbone tail (which runs first). A model whose whole backbone trains (its tail is whole) reads
        decoded photos ``(n, 3, H, W)`` in training; its extractor is that trained backbone (polyvse.features.whole),
        so its ``(n, dim)`` features have been through it already."""
        x = to_device(torch.as_tensor(feats), self.device)
        if self.image_tail is not None and (x.dim() == 4 or not self.image_tail.whole):
            x = self.image_tail(x)
        return self._joint(self.image_head(x))

    def forward(self, feats: torch.Tensor, ids: torch.Tensor, lengths: torch.Tensor, langs=None):
        """(image embeddings, text embeddings) of a batch; the entry point DDP wraps."""
        return self.encode_image_features(feats), self.encode_text_ids(ids, lengths, langs)

    def scores(self, images: torch.Tensor, texts: torch.Tensor) -> torch.Tensor:
        return self.similarity(images, texts)
