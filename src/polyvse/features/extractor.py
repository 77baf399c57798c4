"""Image feature extractors: a frozen ImageNet CNN that turns a photo into one pooled vector.

A :class:`FeatureExtractor` bundles a backbone, its weights and the preprocessing those weights
expect. Its :attr:`~FeatureExtractor.key` names all of that, so cached features computed with one
configuration are never mixed up with another's.

Ten-crop mode (as in VSE++ and the papers it follows) resizes the photo, takes the four corner
crops, the centre crop and their mirror images, runs all ten through the network and averages
the ten pooled vectors into one.
"""

from __future__ import annotations

import abc
import copy
import hashlib
import re
from collections.abc import Sequence

import numpy as np
import torch
from PIL import Image

from ..device import autocast, check_precision, ieee_fp32, module_device, to_device
from ..errors import PolyvseError

__all__ = [
    "FeatureExtractor",
    "Preprocess",
    "UnknownBackboneError",
    "WeightsUnavailableError",
    "fold_batchnorm_",
    "freeze_for_inference_",
]

#: Bump when the preprocessing code changes in a way that changes the numbers it produces
#: (it is part of every extractor's cache key).
PREPROCESS_VERSION = 1

_NUM_CROPS = 10


class UnknownBackboneError(PolyvseError, ValueError):
    """A backbone name polyvse does not know."""


class WeightsUnavailableError(PolyvseError):
    """Pretrained weights that are not on this machine and could not be downloaded."""


class Preprocess:
    """Photo -> normalised tensor, picklable so DataLoader workers can run it.

    Resize the shorter side to ``resize`` (with ``squash``: both sides, ignoring the aspect ratio, for models
    trained on photos that were squashed to a square), then either centre-crop ``crop`` (output ``3 x crop x
    crop``) or take ten crops (output ``10 x 3 x crop x crop``). On a square photo ``squash`` changes nothing.
    """

    def __init__(
        self,
        resize: int,
        crop: int,
        mean: Sequence[float],
        std: Sequence[float],
        interpolation: str = "bilinear",
        ten_crop: bool = False,
        squash: bool = False,
    ):
        self.squash = bool(squash)
        self.resize = int(resize)
        self.crop = int(crop)
        self.mean = tuple(float(m) for m in mean)
        self.std = tuple(float(s) for s in std)
        self.interpolation = interpolation
        self.ten_crop = bool(ten_crop)
        self._resize = self._resize_transform()
        # (pixel / 255 - mean) / std as one multiply-add, in numpy: single-threaded on purpose, since
        # torch's multi-threaded elementwise ops cost several times more CPU on these small images
        std = np.asarray(self.std, dtype=np.float32)
        self._scale = (1.0 / (255.0 * std)).astype(np.float32)
        self._shift = (np.asarray(self.mean, dtype=np.float32) / std).astype(np.float32)

    def _crops(self, arr: np.ndarray) -> list[np.ndarray]:
        """Centre crop, or torchvision's ten_crop order: 4 corners + centre, then the same mirrored."""
        c = self.crop
        h, w = arr.shape[:2]
        if h < c or w < c:
            raise ValueError(f"image {w}x{h} is smaller than the {c}x{c} crop")
        top, left = int(round((h - c) / 2.0)), int(round((w - c) / 2.0))  # as torchvision center_crop
        centre = arr[top : top + c, left : left + c]
        if not self.ten_crop:
            return [centre]

        def five(a: np.ndarray) -> list[np.ndarray]:
            return [a[:c, :c], a[:c, w - c :], a[h - c :, :c], a[h - c :, w - c :], a[top : top + c, left : left + c]]

        return five(arr) + five(arr[:, ::-1])

    def __call__(self, img: Image.Image) -> torch.Tensor:
        arr = np.asarray(self.resized(img))  # (H, W, 3) uint8
        if not self.ten_crop:  # crop first: fewer pixels to convert
            return self.normalised(self._crops(arr)[0])
        norm = arr.astype(np.float32) * self._scale - self._shift  # once: the ten crops overlap
        return torch.from_numpy(np.ascontiguousarray(np.stack([c.transpose(2, 0, 1) for c in self._crops(norm)])))

    def resized(self, img: Image.Image) -> Image.Image:
        """The photo resized as this preprocessing resizes it before cropping (RGB)."""
        if img.mode != "RGB":  # e.g. a greyscale PIL image handed over directly
            img = img.convert("RGB")
        return self._resize(img)

    def normalised(self, crop: np.ndarray) -> torch.Tensor:
        """A ``(H, W, 3)`` uint8 crop -> the network's ``3 x H x W`` float32 input."""
        norm = crop.astype(np.float32) * self._scale - self._shift
        return torch.from_numpy(np.ascontiguousarray(norm.transpose(2, 0, 1)))

    def normalised_batch(self, crops: torch.Tensor) -> torch.Tensor:
        """``(n, 3, H, W)`` uint8 crops -> the network's float32 input, on their device (the same multiply-add as
        :meth:`normalised`, where the batch lands: the pixel path's crops cross processes as uint8)."""
        scale = torch.as_tensor(self._scale, device=crops.device).view(1, 3, 1, 1)
        shift = torch.as_tensor(self._shift, device=crops.device).view(1, 3, 1, 1)
        return crops.float() * scale - shift

    def _resize_transform(self):
        # imported here: torchvision costs seconds to import, and training on cached features never needs it
        from torchvision.transforms import v2 as T

        size = (self.resize, self.resize) if self.squash else self.resize
        return T.Resize(size, interpolation=T.InterpolationMode(self.interpolation), antialias=True)

    def squashed(self) -> Preprocess:
        """The same preprocessing with ``squash`` on."""
        other = copy.copy(self)
        other.squash = True
        other._resize = other._resize_transform()
        return other

    def describe(self, squash: bool | None = None) -> str:
        """Short, filesystem-safe description of everything that changes the output numbers (``squash=False``:
        as if squash were off, which is the same numbers for square photos)."""
        norm = "-".join(f"{v:.4g}" for v in self.mean + self.std)
        crops = "10crop" if self.ten_crop else "center"
        if self.squash if squash is None else squash:
            crops += ".squash"
        return f"r{self.resize}c{self.crop}.{self.interpolation}.norm{norm}.{crops}.p{PREPROCESS_VERSION}"

    def __repr__(self) -> str:
        return f"Preprocess({self.describe()})"


class FeatureExtractor(abc.ABC):
    """A frozen CNN backbone + its preprocessing, producing ``dim``-dimensional photo vectors.

    Subclasses set :attr:`name`, :attr:`dim`, :attr:`weights_tag` and :attr:`preprocess`, and
    implement :meth:`_pooled` (batch of crops -> pooled features) and :meth:`_head` (pooled
    features -> ImageNet logits).
    """

    name: str
    dim: int
    ten_crop: bool
    #: identifies the weights (e.g. ``"IMAGENET1K_V1"``); part of :attr:`key`
    weights_tag: str
    preprocess: Preprocess
    model: torch.nn.Module
    #: fp32, or bf16 autocast (CUDA only: see polyvse.device); bf16 features are cached under their own key
    precision: str = "fp32"
    #: crops per forward pass: bounds peak memory when ten_crop multiplies a batch by ten, and
    #: small passes keep activations in the CPU cache (faster than one big pass)
    max_crops_per_pass: int = 16

    @property
    def key(self) -> str:
        """Identifies backbone + weights + crops + preprocessing; safe as a directory name."""
        return self._key(self.preprocess.describe())

    @property
    def square_key(self) -> str:
        """The key without squash: its vectors of square photos are this extractor's too (squash changes nothing
        there), which lets a squashing extractor read the features its model was trained on."""
        return self._key(self.preprocess.describe(squash=False))

    @property
    def runtime(self) -> str:
        """What computes the vectors: "torch", or "onnx" (ONNX Runtime: ``BackboneCutExtractor`` on a CPU,
        :mod:`polyvse.util.frozen_onnx`)."""
        return "torch"

    @property
    def cache_key(self) -> str:
        """The feature cache's folder of this extractor's vectors: :attr:`key`, with the runtime that computes them
        where that is not torch, so two runtimes' vectors never mix (the model trained on either reads the same
        features, to float rounding: :attr:`key`, which a checkpoint records, does not name the runtime)."""
        return self.key + self._runtime_mark()

    @property
    def cache_square_key(self) -> str:
        """:attr:`square_key` as :attr:`cache_key` extends :attr:`key`."""
        return self.square_key + self._runtime_mark()

    def _runtime_mark(self) -> str:
        if self.runtime == "torch":  # torch's keys as they always were: its caches stay valid
            return ""
        from ..util.frozen_onnx import ONNX_RUNTIME

        return f".{ONNX_RUNTIME}"

    def keep_graphs_in(self, folder) -> None:
        """Where a runtime other than torch keeps the graphs it exports (the feature cache gives its own folder);
        torch exports none."""
        return None

    def _key(self, preprocessing: str) -> str:
        raw = f"{self.name}.{self.weights_tag}.{preprocessing}"
        if self.precision != "fp32":  # other numbers: never mixed into the fp32 cache
            raw += f".{self.precision}"
        return re.sub(r"[^A-Za-z0-9._-]+", "_", raw)

    @property
    def image_size(self) -> int:
        return self.preprocess.crop

    @property
    def device(self) -> torch.device:
        return module_device(self.model)

    def to(self, device: torch.device, precision: str = "fp32") -> FeatureExtractor:
        """Run the backbone on ``device`` (a torch.device from ``polyvse.device.resolve_device``) at
        ``precision``; returns self."""
        self.precision = check_precision(precision, device)
        self.model.to(device)
        return self

    def transform(self, img: Image.Image) -> torch.Tensor:
        """RGB PIL image -> ``3 x H x W`` (``10 x 3 x H x W`` when :attr:`ten_crop`) tensor."""
        return self.preprocess(img)

    @abc.abstractmethod
    def _pooled(self, x: torch.Tensor) -> torch.Tensor:
        """``(m, 3, H, W)`` normalised crops -> ``(m, dim)`` pooled pre-classifier features."""

    @abc.abstractmethod
    def _head(self, features: torch.Tensor) -> torch.Tensor:
        """``(n, dim)`` pooled features -> ``(n, 1000)`` ImageNet logits."""

    def _check_batch(self, x: torch.Tensor) -> tuple[int, int]:
        crop = self.preprocess.crop
        want = (_NUM_CROPS, 3, crop, crop) if self.ten_crop else (3, crop, crop)
        if x.dim() != len(want) + 1 or tuple(x.shape[1:]) != want:
            raise ValueError(
                f"{self.name} (ten_crop={self.ten_crop}) expects a batch shaped (n, "
                f"{', '.join(map(str, want))}), got {tuple(x.shape)}; build it with extractor.transform()"
            )
        return x.shape[0], (_NUM_CROPS if self.ten_crop else 1)

    @torch.inference_mode()
    def forward_batch(self, x: torch.Tensor) -> torch.Tensor:
        """Batch from :meth:`transform` (stacked) -> ``(n, dim)`` float32 features, on the CPU whatever the
        device.

        With ten crops the ``n x 10`` crop features are averaged per photo.
        """
        n, crops = self._check_batch(x)
        device = self.device
        flat = to_device(x, device).reshape(n * crops, *x.shape[-3:]).float()
        flat = flat.contiguous(memory_format=torch.channels_last)
        # on a GPU one pass takes the whole batch: the chunking is for CPU caches and ten-crop memory
        step = self.max_crops_per_pass if device.type == "cpu" else max(1, len(flat))
        with autocast(device, self.precision), ieee_fp32(device):  # no TF32: a GPU fills the CPU's cache
            parts = [self._pooled(chunk).float() for chunk in torch.split(flat, step)]
        feats = torch.cat(parts) if parts else flat.new_zeros((0, self.dim))
        return feats.reshape(n, crops, self.dim).mean(dim=1).cpu()

    def _stack(self, images: Sequence[Image.Image]) -> torch.Tensor:
        return torch.stack([self.transform(img) for img in images])

    def extract(self, images: Sequence[Image.Image]) -> np.ndarray:
        """PIL images (RGB, e.g. from :func:`~polyvse.features.images.load_image`) -> ``(n, dim)`` float32."""
        if len(images) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        step = 32  # bounds memory: the preprocessed tensors of a chunk, not of the whole list
        parts = [self.forward_batch(self._stack(images[i : i + step])) for i in range(0, len(images), step)]
        return torch.cat(parts).numpy().astype(np.float32, copy=False)

    @torch.inference_mode()
    def classify(self, images: Sequence[Image.Image]) -> torch.Tensor:
        """ImageNet logits ``(n, 1000)`` (class order of torchvision's ImageNet ``categories``).

        With ten crops the head is applied to the averaged features, which for a linear head is
        the average of the ten crops' logits.
        """
        if len(images) == 0:
            return self._head(torch.zeros((0, self.dim), device=self.device)).cpu()
        step = 32
        return torch.cat(
            [
                self._head(self.forward_batch(self._stack(images[i : i + step])).to(self.device)).cpu()
                for i in range(0, len(images), step)
            ]
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(key={self.key!r}, dim={self.dim})"


@torch.no_grad()
def fold_batchnorm_(conv: torch.nn.Conv2d, bn: torch.nn.BatchNorm2d) -> None:
    """Fold an eval-mode BatchNorm that follows ``conv`` into the conv's weight and bias (in place).

    The caller then replaces ``bn`` by ``nn.Identity()``. Same outputs up to float rounding, and on CPU
    it saves a full pass over every activation map.
    """
    scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
    conv.weight.mul_(scale.reshape(-1, 1, 1, 1))
    bias = bn.bias - bn.running_mean * scale
    if conv.bias is not None:
        bias = bias + conv.bias * scale
    conv.bias = torch.nn.Parameter(bias.detach().clone(), requires_grad=False)


def freeze_for_inference_(model: torch.nn.Module) -> torch.nn.Module:
    """eval mode, no gradients, channels-last memory format (2-7x faster convolutions on CPU)."""
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model.to(memory_format=torch.channels_last)


def weights_digest(module: torch.nn.Module) -> str:
    """A short hash of a module's weights (names and float32 values, whatever their device or memory layout)."""
    h = hashlib.sha256()
    for name, tensor in module.state_dict().items():
        h.update(name.encode())
        h.update(tensor.detach().to("cpu", torch.float32).contiguous().numpy().tobytes())
    return h.hexdigest()[:16]
