"""The frozen towers' vectors of a parallel file's lines, through the sentence cache.

A new language's lines are read by every tower that reads the language, listed by polyvse or not (e5 reads any
script: ``PretrainedSentenceEncoder.reads_unlisted_languages``); a tower that does not read it gives zeros in its
slice, as USE does for Czech in training. Vectors come from the content-keyed sentence cache
(``<cache root>/sentences``, the one training fills), so a second adaptation of the same file -- a resumed one,
another method, a learning curve's next size -- embeds nothing again.

A model that fine-tuned e5's last layers (``model.text_finetune_layers``, ``captions.tail_layers`` > 0) reads e5's
part of a line through its trained tail: the frozen front's hidden states (content-keyed state cache, the one
training fills) run through the checkpoint's tail, so the vector a new language's part learns from is the one it
reads when the adapted model serves that language. The tail stays as trained: adaptation changes no old vector.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from ..errors import CheckpointError
from ..util.batching import in_length_batches

__all__ = ["line_vectors", "towers_reading"]


def towers_reading(captions, lang: str) -> list[str]:
    """Names of the towers that give ``lang`` a vector (listed or not)."""
    return [t.name for t in captions.towers if t.reads(lang, unlisted=True)]


def line_vectors(
    captions,
    texts: Sequence[str],
    lang: str,
    cache_dir: str | os.PathLike | None,
    progress: bool = True,
    text_encoder=None,
    batch_size: int = 256,
) -> np.ndarray:
    """float32 ``(len(texts), captions.dim)``: each text's fused tower vector in language ``lang``, the input of a
    per-language part. A model with an e5 tail needs its ``text_encoder`` (the checkpoint's, whose tail runs)."""
    from ..modules.pretrained.captions import PretrainedCaptionEncoder

    if not towers_reading(captions, lang):
        raise CheckpointError(f"no tower of {captions.name} reads {lang!r}: the model cannot be taught it")
    tail_layers = int(getattr(captions, "tail_layers", 0))
    if tail_layers and getattr(text_encoder, "tail", None) is None:
        raise CheckpointError(
            f"this model fine-tuned e5's last {tail_layers} layers: its lines' vectors come "
            "through the trained tail; pass the checkpoint's text_encoder"
        )
    reader = PretrainedCaptionEncoder(
        captions.name, captions.options, cache_dir=cache_dir, progress=progress, tail_layers=tail_layers
    )
    texts = list(texts)
    if not texts:
        return np.zeros((0, captions.dim), dtype=np.float32)
    rows = reader.ids_many(texts, lang, unlisted=True)
    if not tail_layers:
        return np.stack(rows).astype(np.float32, copy=False)
    return _through_tail(reader, text_encoder, rows, batch_size)


def _through_tail(reader, text_encoder, rows, batch_size: int) -> np.ndarray:
    """The fused vectors of (states, other towers' vector) rows: e5's slice from the trained tail, in eval mode.
    Rows go through in batches of similar length (each batch is padded to its longest row), in the rows' order out."""
    import torch

    device = next(text_encoder.tail.parameters()).device
    was_training = text_encoder.training
    text_encoder.eval()
    try:
        with torch.no_grad():

            def encode(take):
                x, lengths = reader.pad([rows[j] for j in take])
                return text_encoder.sentence_vectors(x.to(device), lengths.to(device)).cpu().numpy()

            return in_length_batches([len(states) for states, _ in rows], len(rows), batch_size, encode)
    finally:
        text_encoder.train(was_training)
