"""Augmented views of a photo: random-resized crops, flipped half the time, as VSE++ and CLIP train on.

Two users draw them. The pixel path (``polyvse_train.pixels``, a whole backbone fine-tuned on a GPU) crops every
photo afresh for every step. A run on cached features cannot: its photos pass the frozen network once. What it
can do is cache a few fixed views of each training photo (``data.photo_views``): :class:`ViewPreprocess` is the
preprocessing of view ``v``, a crop drawn from a generator seeded by the view and the photo's pixels, so the same
photo always gives the same view (the feature cache's content-addressed vectors stay valid) while two photos, or
two views of one photo, get different crops. Each view is an extractor of its own key (:func:`view_extractor`),
cached, resumable and shared between runs like any feature. Training then draws one view per photo and step.
"""

from __future__ import annotations

import copy
import hashlib

import numpy as np
from PIL import Image

from .extractor import FeatureExtractor, Preprocess

__all__ = ["CROP_RATIO", "ViewPreprocess", "crop_box", "random_view", "view_draw", "view_extractor"]

#: aspect ratios of the random crops (torchvision's RandomResizedCrop default)
CROP_RATIO = (3 / 4, 4 / 3)


def crop_box(rng: np.random.Generator, height: int, width: int, scale_min: float) -> tuple[int, int, int, int]:
    """(top, left, h, w) of a random crop of ``scale_min`` to all of the area, aspect in CROP_RATIO (as
    torchvision's RandomResizedCrop draws it: ten tries, then the whole photo)."""
    area, log_ratio = height * width, np.log(CROP_RATIO)
    for _ in range(10):
        target = area * rng.uniform(scale_min, 1.0)
        aspect = float(np.exp(rng.uniform(*log_ratio)))
        w, h = int(round(np.sqrt(target * aspect))), int(round(np.sqrt(target / aspect)))
        if 0 < w <= width and 0 < h <= height:
            return int(rng.integers(0, height - h + 1)), int(rng.integers(0, width - w + 1)), h, w
    return 0, 0, height, width


def random_view(img: Image.Image, preprocess: Preprocess, scale_min: float, rng: np.random.Generator) -> Image.Image:
    """The photo resized as ``preprocess`` resizes it, then a random crop (:func:`crop_box`) resized to the
    network's input, mirrored half the time: an RGB ``crop x crop`` image."""
    img = preprocess.resized(img)
    (top, left, h, w), flip = view_draw(rng, img.height, img.width, scale_min)
    c = preprocess.crop
    resample = Image.Resampling[preprocess.interpolation.upper()]
    img = img.resize((c, c), resample, box=(left, top, left + w, top + h))
    if flip:
        img = img.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    return img


def view_draw(
    rng: np.random.Generator, height: int, width: int, scale_min: float
) -> tuple[tuple[int, int, int, int], bool]:
    """A view's draws from ``rng`` for a ``height x width`` photo (already resized as the preprocessing resizes
    it): its crop box (:func:`crop_box`), then whether it is mirrored. :func:`random_view` and the pixel path's
    photos kept on the device (``polyvse_train.pixels``) both draw through it, so they take the same views."""
    box = crop_box(rng, height, width, scale_min)
    return box, bool(rng.random() < 0.5)


class ViewPreprocess:
    """The preprocessing of augmented view ``view`` (1, 2, ...): photo -> the network's ``3 x crop x crop`` input,
    a :func:`random_view` drawn from a generator seeded by ``view`` and the photo's decoded pixels. Everything
    else (resize, crop size, normalisation, squash) is ``base``'s, and so is the view's description, extended."""

    def __init__(self, base: Preprocess, view: int, scale_min: float):
        if view < 1:
            raise ValueError(f"view {view}: view 0 is the photo itself (the base preprocessing); views count from 1")
        if not 0 < scale_min <= 1:
            raise ValueError(f"scale_min {scale_min}: a fraction of the photo's area, in (0, 1]")
        if base.ten_crop:
            raise ValueError("an augmented view is one crop; its base preprocessing cannot take ten")
        self.base, self.view, self.scale_min = base, int(view), float(scale_min)

    def __getattr__(self, name: str):
        if name == "base":  # not set yet (unpickling): no recursion through __getattr__
            raise AttributeError(name)
        return getattr(self.base, name)  # resize, crop, squash, mean, std, interpolation, ten_crop, ...

    def __call__(self, img: Image.Image) -> torch.Tensor:  # noqa: F821 - torch comes with the extractor
        rng = np.random.default_rng([self.view, pixel_seed(img)])
        return self.base.normalised(np.asarray(random_view(img, self.base, self.scale_min, rng)))

    def describe(self, squash: bool | None = None) -> str:
        return f"{self.base.describe(squash)}.view{self.view}.rrc{self.scale_min:g}.flip"

    def __repr__(self) -> str:
        return f"ViewPreprocess({self.describe()})"


def pixel_seed(img: Image.Image) -> int:
    """A seed from the decoded photo's size, mode and pixels: the same photo file gives the same seed anywhere."""
    h = hashlib.sha256(f"{img.mode}{img.size}".encode())
    h.update(img.tobytes())
    return int.from_bytes(h.digest()[:8], "little")


def view_extractor(extractor: FeatureExtractor, view: int, scale_min: float) -> FeatureExtractor:
    """``extractor`` with the preprocessing of augmented view ``view``: the same network (shared, not copied),
    its own cache key. View 0 is ``extractor`` itself."""
    if view == 0:
        return extractor
    out = copy.copy(extractor)
    out.preprocess = ViewPreprocess(extractor.preprocess, view, scale_min)
    return out
