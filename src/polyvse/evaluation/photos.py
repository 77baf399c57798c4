"""Photos into a model's joint space for an evaluation gallery, by the path the model embeds photos: the torch
model through the feature cache (its backbone's features, then its image head), a numpy model
(``polyvse.model.loading.photo_model`` without torch) through the checkpoint's ONNX image encoder, pixels to
vectors (``polyvse.features.onnx_encoder``; no feature cache). Either way the readable photos' rows, their
positions in the list and the unreadable ones, as the feature cache reports them."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["GalleryPhotos", "embed_photos"]


@dataclass
class GalleryPhotos:
    embeddings: np.ndarray  # float32 (n_ok, embed_dim), the model's raw image embeddings
    index: np.ndarray  # int64 (n_ok,): position of each row in the input list
    failures: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)


def embed_photos(
    model: Any, paths: Sequence[str | os.PathLike], cache_dir: Path, progress: bool = True, strict: bool = False
) -> GalleryPhotos:
    """``paths`` embedded by ``model`` (module docstring); unreadable photos are listed (``strict``: the first
    one stops it)."""
    encoder = getattr(model, "image_encoder", None)
    if encoder is not None:
        result = encoder.embed_files(list(paths), progress=progress, strict=strict)
        return GalleryPhotos(result.vectors, result.index, list(result.failures))
    from ..features.cache import extract_features

    result = extract_features(list(paths), model.extractor, cache_dir, strict=strict, progress=progress)
    return GalleryPhotos(model.encode_image_features(result.features), result.index, list(result.failures))
