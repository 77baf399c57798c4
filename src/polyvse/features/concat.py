"""Several backbones as one: ``efficientnet-lite0+efficientnet-lite2`` is each photo's vectors from both
networks, concatenated in the order named.

The parts keep their own caches (a photo's Lite2 vector is the same whether Lite2 runs alone or in a pair), so a
pair costs no extraction when both parts are cached and no second copy on disk; :func:`extract_features` asks each
part for its features and joins the rows every part could read.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from PIL import Image

from .extractor import FeatureExtractor

__all__ = ["ConcatExtractor", "SEPARATOR", "split_backbone_name"]

SEPARATOR = "+"


def split_backbone_name(name: str) -> list[str]:
    """``"a+b"`` -> ``["a", "b"]``; a plain name -> ``[name]``."""
    return [part.strip() for part in name.split(SEPARATOR)]


class ConcatExtractor:
    """The features of ``parts`` side by side: ``dim`` is the sum of theirs, ``key`` names every part."""

    ten_crop: bool

    def __init__(self, parts: Sequence[FeatureExtractor]):
        if len(parts) < 2:
            raise ValueError("a concatenated backbone needs at least two parts")
        self.parts = list(parts)
        self.name = SEPARATOR.join(p.name for p in self.parts)
        self.dim = sum(p.dim for p in self.parts)
        self.ten_crop = self.parts[0].ten_crop
        self.weights_tag = SEPARATOR.join(p.weights_tag for p in self.parts)

    @property
    def key(self) -> str:
        return "__".join(p.key for p in self.parts)

    @property
    def square_key(self) -> str:
        return "__".join(p.square_key for p in self.parts)

    @property
    def precision(self) -> str:
        return self.parts[0].precision

    @property
    def device(self) -> torch.device:
        return self.parts[0].device

    @property
    def image_size(self) -> int:
        return max(p.image_size for p in self.parts)

    def to(self, device: torch.device, precision: str = "fp32") -> ConcatExtractor:
        for p in self.parts:
            p.to(device, precision)
        return self

    def extract(self, images: Sequence[Image.Image]) -> np.ndarray:
        """PIL images -> ``(n, dim)`` float32: every part's features, concatenated."""
        return np.concatenate([p.extract(images) for p in self.parts], axis=1)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(key={self.key!r}, dim={self.dim})"
