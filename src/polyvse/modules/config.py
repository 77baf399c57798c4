"""What a joint embedding model is made of, as plain data (no torch): a checkpoint's config.json "model"
section, read by the torch model (``JointEmbeddingModel``) and by the numpy text-query path alike."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

#: config.json's captions "kind" of a frozen pretrained sentence encoder (PretrainedCaptionEncoder)
PRETRAINED_CAPTIONS = "pretrained-sentence-encoder"


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
    text_encoder: str = "gru"  # gru | lstm | mean (mean-pooled word embeddings) | pretrained (frozen vectors)
    image_head: str = "linear"  # linear | mlp (MULE: Linear-BN-ReLU-Linear)
    similarity: str = "cosine"  # cosine | order
    text_sharing: str = "shared"  # shared | per_language (one pooler + projection per language)
    languages: list[str] = field(default_factory=list)  # order = language index used by `langs` tensors
    universal_dim: int = 0  # > 0: MULE's per-language word projection into a universal embedding
    image_hidden_dim: int = 2048  # hidden width of the mlp image head
    pretrained_dim: int = 0  # text_encoder pretrained: size of the frozen sentence vectors the head reads
    text_head: str = "linear"  # text_encoder pretrained: linear | mlp (hidden_dim units)
    pretrained_towers: list[int] = field(default_factory=list)  # fused towers: the size of each one's slice
    tower_dropout: float = 0.0  # fused towers: drop a tower's slice with this probability in training
    language_map: list[str] = field(default_factory=list)  # Translator: languages whose words pass a d x d map
    # a trainable backbone tail (polyvse.features.tail): "<backbone>:tail<K>" names the image features, which are
    # the flattened (C, h, w) map entering the backbone's last K blocks; "" = pooled features of a frozen backbone
    image_tail: str = ""
    image_tail_shape: list[int] = field(default_factory=list)  # (C, h, w) of that map
    # text_encoder pretrained with e5-small first: its last K layers train (polyvse.modules.pretrained.e5.tail) on the
    # cached states entering them; 0 = e5's frozen sentence vectors
    text_tail_layers: int = 0

    def to_dict(self) -> dict:
        return asdict(self)
