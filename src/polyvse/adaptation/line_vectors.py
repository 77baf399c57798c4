"""The frozen towers' vectors of a parallel file's lines, through the sentence cache.

A new language's lines are read by every tower that reads the language, listed by polyvse or not (e5 reads any
script: ``PretrainedSentenceEncoder.reads_unlisted_languages``); a tower that does not read it gives zeros in its
slice, as USE does for Czech in training. Vectors come from the content-keyed sentence cache
(``<cache root>/sentences``, the one training fills), so a second adaptation of the same file -- a resumed one,
another method, a learning curve's next size -- embeds nothing again.
"""
from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from ..errors import CheckpointError

__all__ = ["line_vectors", "towers_reading"]


def towers_reading(captions, lang: str) -> list[str]:
    """Names of the towers that give ``lang`` a vector (listed or not)."""
    return [t.name for t in captions.towers if t.reads(lang, unlisted=True)]


def line_vectors(captions, texts: Sequence[str], lang: str, cache_dir: str | os.PathLike | None,
                 progress: bool = True) -> np.ndarray:
    """float32 ``(len(texts), captions.dim)``: each text's fused tower vector in language ``lang``."""
    from ..models.pretrained.captions import PretrainedCaptionEncoder

    if not towers_reading(captions, lang):
        raise CheckpointError(f"no tower of {captions.name} reads {lang!r}: the model cannot be taught it")
    if getattr(captions, "tail_layers", 0):  # its e5 part is the trained tail's vector, not the frozen one
        raise CheckpointError(f"this model fine-tuned e5's last {captions.tail_layers} layers (text_tail_layers); "
                              "teaching it a language is not supported yet: adapt a model trained without "
                              "model.text_finetune_layers")
    reader = PretrainedCaptionEncoder(captions.name, captions.options,
                                      cache_dir=cache_dir, progress=progress)
    texts = list(texts)
    if not texts:
        return np.zeros((0, captions.dim), dtype=np.float32)
    return np.stack(reader.ids_many(texts, lang, unlisted=True)).astype(np.float32, copy=False)
