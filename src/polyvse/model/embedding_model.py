"""What every polyvse model offers an index and a searcher, torch or not: ``EmbeddingModel``.

Three classes implement it: ``polyvse.model.torch_model.PolyvseModel`` (the torch model: text and photos, any
device), ``polyvse.model.numpy_serving.text_query.TextQueryModel`` (a word-level checkpoint's text branch in numpy) and
``polyvse.model.numpy_serving.tower_query.TowerQueryModel`` (a frozen-tower checkpoint's learned parts in numpy), the last two for
text queries without importing torch (``polyvse.model.loading.query_model`` picks one). An index fingerprints each
through ``config``, ``checkpoint``, ``captions``, ``similarity_name`` and ``named_weights()``, so it accepts one
exactly when it accepts the others.
This module imports no torch.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np


class EmbeddingModel(ABC):
    """A trained model's embedding space: captions (and, for the torch model, photos) -> vectors, and scores."""

    checkpoint: Any  # the checkpoint it was loaded from: languages, backbone, feature key, training metadata
    captions: Any  # polyvse.modules.text_input.CaptionEncoder: vocabulary and tokenizers

    @property
    @abstractmethod
    def config(self):
        """The ModelConfig the checkpoint was built from."""

    @property
    def languages(self) -> list[str]:
        return list(self.checkpoint.languages)

    @property
    def embed_dim(self) -> int:
        return self.config.embed_dim

    @property
    def similarity_name(self) -> str:
        """ "cosine" or "order": how the model scores a photo against a caption."""
        return self.config.similarity

    def reads_zero_shot(self, lang: str) -> bool:
        """Whether ``lang`` is served zero-shot: not one of the model's languages, but one its frozen towers read,
        and a fallback part is on (``zero_shot`` not "off"); ``polyvse.languages.route_language`` decides."""
        from ..languages import ZERO_SHOT, serving_status

        return serving_status(self, lang) == ZERO_SHOT

    @abstractmethod
    def named_weights(self) -> Mapping[str, Any]:
        """Every weight by its state-dict name, as numpy arrays or torch tensors (what the index fingerprints
        hash)."""

    @abstractmethod
    def encode_text(self, texts: str | Sequence[str], lang: str) -> np.ndarray:
        """Captions in language ``lang`` -> (n, embed_dim) float32 vectors."""

    @abstractmethod
    def similarity(self, images: np.ndarray, texts: np.ndarray) -> np.ndarray:
        """Score matrix (len(images), len(texts)) under the model's similarity."""
