"""Partial fine-tuning of an image backbone: the frozen part runs once per photo, its last blocks train.

Fine-tuning a whole CNN per training step is out of reach on two CPU cores (thousands of photos, dozens of
epochs), but its last blocks are cheap: EfficientNet-Lite's last MBConv block and 1x1 head conv work on a
7x7 (Lite0) to 9x9 (Lite2) map, 11-13 % of the network's multiply-adds (49M of 384M for Lite0, 94M of 858M
for Lite2, by torch.utils.flop_counter), and they need no pass through the rest. So the backbone is cut
before its last ``K`` blocks:

- :class:`BackboneCutExtractor` (backbone name ``efficientnet-lite2:tail1``) is a frozen feature extractor
  whose "feature" is the activation map entering the cut, flattened to ``C*h*w`` floats; it is cached
  like any feature (content-addressed, resumable) and computed once per photo (on a CPU by ONNX Runtime,
  :mod:`.cut_onnx`, under a cache key of its own);
- :class:`BackboneTail` is the rest -- the last ``K`` blocks, the head conv and the average pool -- as a
  trainable module of the retrieval model (``ModelConfig.image_tail``), initialised from the ImageNet
  weights; its output (1280-d) feeds the image head as the frozen backbone's pooled features would.

Cut extractor + untrained tail reproduce the full frozen extractor's pooled features (to float rounding),
so the fine-tuned model starts where the frozen-feature model starts. The BatchNorms are folded into the
convs before the cut (see ``efficientnet._fuse_for_inference_``), so the trained tail has no batch
statistics to drift on small batches. Pixel augmentation per step needs the whole network per step (a GPU); on
cached maps the nearest thing is a few augmented views of each training photo cached alongside
(``data.photo_views``, :mod:`.augment`).

The whole backbone is the tail cut before the stem (:func:`whole_of`, named ``efficientnet-lite2:whole``): the
stem conv too, reading normalised pixels ``(n, 3, H, W)``. It trains on decoded, augmented photos (the
trainer's pixel path), and its checkpoint meets photos through the trained backbone itself
(:mod:`.whole`), since pixels are no feature worth caching.
"""

from __future__ import annotations

import copy
import re

import torch
from torch import nn

from ..util.frozen_onnx import front_runtime
from .cut_onnx import CutGraph
from .extractor import FeatureExtractor

__all__ = [
    "TAIL_MARK",
    "WHOLE_MARK",
    "BackboneCutExtractor",
    "BackboneTail",
    "parse_tail_name",
    "split_tail_name",
    "split_whole_name",
    "tail_name",
    "tail_of",
    "whole_name",
    "whole_of",
]

#: ``<backbone>:tail<K>`` names a cut extractor (its features: the map entering the last K blocks)
TAIL_MARK = ":tail"
_TAIL = re.compile(r"^(?P<base>.+):tail(?P<blocks>[0-9]+)$")
#: ``<backbone>:whole`` names a whole backbone that trains (the tail of every block, stem included)
WHOLE_MARK = ":whole"


def tail_name(backbone: str, blocks: int) -> str:
    return f"{backbone}{TAIL_MARK}{int(blocks)}"


def whole_name(backbone: str) -> str:
    return f"{backbone}{WHOLE_MARK}"


def split_whole_name(name: str) -> str | None:
    """``"efficientnet-lite2:whole"`` -> ``"efficientnet-lite2"``; None for any other name."""
    return name.removesuffix(WHOLE_MARK) if name.endswith(WHOLE_MARK) else None


def split_tail_name(name: str) -> tuple[str, int] | None:
    """``"efficientnet-lite2:tail1"`` -> ``("efficientnet-lite2", 1)``; None for a name without a tail."""
    m = _TAIL.match(name)
    return (m.group("base"), int(m.group("blocks"))) if m else None


class BackboneTail(nn.Module):
    """The last ``len(blocks)`` MBConv blocks + head conv + ReLU6 + average pool of an EfficientNet-Lite, as a
    trainable module: ``(n, C*h*w)`` flattened maps (from :class:`BackboneCutExtractor`) -> ``(n, 1280)``. With
    ``stem`` (the stem conv, BatchNorm folded) it is the whole backbone, on pixels ``(n, 3, H, W)``."""

    def __init__(
        self, blocks: nn.ModuleList, conv_head: nn.Module, in_shape: tuple[int, int, int], stem: nn.Module | None = None
    ):
        super().__init__()
        self.blocks = blocks
        self.conv_head = conv_head
        self.stem = stem  # registered after the others: a tail's state keys stay what they were
        self.in_shape = tuple(int(s) for s in in_shape)
        self.out_dim = int(conv_head.out_channels)
        for p in self.parameters():
            p.requires_grad_(True)

    @property
    def whole(self) -> bool:
        """Whether this is the whole backbone (its input: pixels, not a cut's map)."""
        return self.stem is not None

    def forward(self, flat: torch.Tensor) -> torch.Tensor:
        # channels-last: faster 1x1 convs on CPU, forward and backward
        x = flat.reshape(flat.shape[0], *self.in_shape).contiguous(memory_format=torch.channels_last)
        if self.stem is not None:
            x = nn.functional.relu6(self.stem(x))
        for block in self.blocks:
            x = block(x)
        return nn.functional.relu6(self.conv_head(x)).mean(dim=(2, 3))


class BackboneCutExtractor(FeatureExtractor):
    """A frozen EfficientNet-Lite cut before its last ``blocks`` MBConv blocks: photo -> flattened map."""

    def __init__(self, full: FeatureExtractor, blocks: int):
        _check_cuttable(full.model, blocks, full.name)
        if full.ten_crop:  # the mean of ten crops' maps is no photo's map
            raise ValueError(
                f"{tail_name(full.name, blocks)}: a cut backbone takes the centre crop only (ten_crop: false)"
            )
        self.full, self.blocks = full, int(blocks)
        self.name = tail_name(full.name, blocks)
        self.weights_tag, self.preprocess, self.model, self.ten_crop = (
            full.weights_tag,
            full.preprocess,
            full.model,
            False,
        )
        with torch.inference_mode():
            crop = self.preprocess.crop
            self.map_shape = tuple(self._map(torch.zeros(1, 3, crop, crop)).shape[1:])
        self.dim = int(self.map_shape[0] * self.map_shape[1] * self.map_shape[2])
        self.graph = CutGraph()  # ONNX Runtime's session of the frozen part, where it runs (runtime)

    @property
    def runtime(self) -> str:
        """ONNX Runtime where the extractor fills a feature cache (which keeps its graph: ``keep_graphs_in``) on a
        CPU in fp32, unless POLYVSE_FRONT_RUNTIME says torch (:mod:`polyvse.util.frozen_onnx`); torch elsewhere
        (a few photos embedded directly pay no export). Its maps are cached under their own key (``cache_key``)."""
        if self.precision != "fp32" or self.graph.graph_dir is None:
            return "torch"
        return front_runtime(self.device.type)

    def keep_graphs_in(self, folder) -> None:
        self.graph.graph_dir = self.graph.graph_dir or folder

    def forward_batch(self, x: torch.Tensor) -> torch.Tensor:
        if self.runtime == "torch":
            return super().forward_batch(x)
        n, _ = self._check_batch(x)  # a cut takes one crop a photo
        return self.graph.run(self, x.reshape(n, *x.shape[-3:]))

    def to(self, device: torch.device, precision: str = "fp32") -> BackboneCutExtractor:
        self.full.to(device, precision)
        self.precision = self.full.precision
        return self

    def _map(self, x: torch.Tensor) -> torch.Tensor:
        m = self.model
        x = m._swish(m._bn0(m._conv_stem(x)))
        for block in m._blocks[: len(m._blocks) - self.blocks]:
            x = block(x)
        return x

    def _pooled(self, x: torch.Tensor) -> torch.Tensor:
        return self._map(x).reshape(x.shape[0], -1)

    def tail_module(self) -> BackboneTail:
        """A trainable copy of the part after the cut, with the ImageNet weights."""
        return tail_of(self.model, self.blocks, self.map_shape)

    @torch.inference_mode()
    def _head(self, features: torch.Tensor) -> torch.Tensor:
        tail = self.tail_module().to(features.device).eval()
        return self.full._head(tail(features))


def parse_tail_name(name: str) -> tuple[str, int]:
    parts = split_tail_name(name)
    if parts is None:
        raise ValueError(
            f"{name!r} names no backbone tail; use <backbone>{TAIL_MARK}<blocks>, e.g. efficientnet-lite2:tail1"
        )
    return parts


def tail_of(model: nn.Module, blocks: int, in_shape) -> BackboneTail:
    """A trainable copy of ``model``'s last ``blocks`` blocks and head conv (an EfficientNet-Lite)."""
    _check_cuttable(model, blocks)
    n = len(model._blocks)
    tail = BackboneTail(copy.deepcopy(model._blocks[n - blocks :]), copy.deepcopy(model._conv_head), in_shape)
    return tail.to(memory_format=torch.channels_last)


def whole_of(model: nn.Module, in_shape) -> BackboneTail:
    """A trainable copy of the whole of ``model`` (an EfficientNet-Lite, BatchNorm folded) up to its pooled
    features: stem, every block, head conv; ``in_shape`` is its input's ``(3, crop, crop)``."""
    _check_cuttable(model, 1)
    whole = BackboneTail(
        copy.deepcopy(model._blocks), copy.deepcopy(model._conv_head), in_shape, stem=copy.deepcopy(model._conv_stem)
    )
    return whole.to(memory_format=torch.channels_last)


def _check_cuttable(model: nn.Module, blocks: int, name: str = "this backbone") -> None:
    if not hasattr(model, "_blocks"):
        raise ValueError(f"{name} cannot be cut: only the EfficientNet-Lite backbones have a trainable tail")
    n_blocks = len(model._blocks)
    if not 1 <= blocks < n_blocks:
        raise ValueError(f"{name} has {n_blocks} blocks; train between 1 and {n_blocks - 1} of them")
