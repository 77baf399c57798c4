"""ResNet-152 backbone (torchvision), the image encoder of VSE++ and the papers that followed it.

2048-d average-pooled features before the classifier. The ImageNet weights (230 MB) are not
shipped: torchvision downloads them once into the torch hub cache (``$TORCH_HOME/hub/checkpoints``,
default ``~/.cache/torch/hub/checkpoints``). Offline, :class:`WeightsUnavailableError` explains how to
put them there.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlparse

import torch
from torch import nn

from .extractor import (
    FeatureExtractor,
    Preprocess,
    WeightsUnavailableError,
    fold_batchnorm_,
    freeze_for_inference_,
)

__all__ = ["ResNet152Extractor", "resnet152_weights_file"]

DEFAULT_WEIGHTS = "IMAGENET1K_V1"


def _weights_enum(weights: str):
    from torchvision.models import ResNet152_Weights

    try:
        return ResNet152_Weights[weights]
    except KeyError:
        choices = ", ".join(w.name for w in ResNet152_Weights)
        raise WeightsUnavailableError(f"unknown ResNet-152 weights {weights!r}; choose one of: {choices}") from None


def resnet152_weights_file(weights: str = DEFAULT_WEIGHTS) -> Path:
    """Where torchvision keeps (or will keep) the downloaded weights file."""
    url = _weights_enum(weights).url
    return Path(torch.hub.get_dir()) / "checkpoints" / os.path.basename(urlparse(url).path)


def _load_state_dict(weights: str) -> dict:
    """The weights from the hub cache, downloading them first if needed; clear error otherwise."""
    enum = _weights_enum(weights)
    target = resnet152_weights_file(weights)
    had_file = target.is_file()
    try:
        return torch.hub.load_state_dict_from_url(
            enum.url, map_location="cpu", progress=True, check_hash=True, weights_only=True
        )
    except Exception as exc:  # noqa: BLE001 - URLError, HTTPError, hash mismatch, corrupt zip, ...
        what = f"{type(exc).__name__}: {exc}"
        if had_file:
            raise WeightsUnavailableError(
                f"the ResNet-152 weights file {target} is unreadable or corrupt ({what}); delete it and "
                f"download it again from {enum.url}"
            ) from None
        raise WeightsUnavailableError(
            f"ResNet-152 ImageNet weights ({weights}) are not on this machine and could not be downloaded "
            f"from {enum.url} ({what}). Either run once with internet access (torchvision caches them), or "
            f"download that file elsewhere and copy it to {target} (set TORCH_HOME to move the torch hub "
            "cache). The default backbone efficientnet-lite0 works offline."
        ) from None


@torch.no_grad()
def _fuse_for_inference_(model: nn.Module) -> nn.Module:
    """Fold every BatchNorm of a torchvision ResNet into the conv before it (inference only)."""
    fold_batchnorm_(model.conv1, model.bn1)
    model.bn1 = nn.Identity()
    for layer in (model.layer1, model.layer2, model.layer3, model.layer4):
        for block in layer:
            for i in (1, 2, 3):
                fold_batchnorm_(getattr(block, f"conv{i}"), getattr(block, f"bn{i}"))
                setattr(block, f"bn{i}", nn.Identity())
            if block.downsample is not None:
                fold_batchnorm_(block.downsample[0], block.downsample[1])
                block.downsample[1] = nn.Identity()
    return model


class ResNet152Extractor(FeatureExtractor):
    """Average-pooled ``layer4`` output of torchvision's ResNet-152 (2048-d, before ``fc``)."""

    name = "resnet152"
    dim = 2048

    def __init__(self, ten_crop: bool = False, *, weights: str = DEFAULT_WEIGHTS, _random_init: bool = False):
        from torchvision.models import resnet152

        enum = _weights_enum(weights)
        tf = enum.transforms()  # torchvision's own eval preprocessing for these weights
        self.ten_crop = bool(ten_crop)
        self.preprocess = Preprocess(
            resize=int(tf.resize_size[0]),
            crop=int(tf.crop_size[0]),
            mean=tf.mean,
            std=tf.std,
            interpolation=tf.interpolation.value,
            ten_crop=ten_crop,
        )
        model = resnet152(weights=None)
        if _random_init:  # tests of shapes and plumbing without the 230 MB download
            self.weights_tag = "random-init"
        else:
            model.load_state_dict(_load_state_dict(weights), strict=True)
            self.weights_tag = enum.name
        model.eval()
        self.model = freeze_for_inference_(_fuse_for_inference_(model))

    def _pooled(self, x: torch.Tensor) -> torch.Tensor:
        m = self.model
        x = m.maxpool(m.relu(m.bn1(m.conv1(x))))
        x = m.layer4(m.layer3(m.layer2(m.layer1(x))))  # BatchNorms are folded into the convs
        return torch.flatten(m.avgpool(x), 1)

    def _head(self, features: torch.Tensor) -> torch.Tensor:
        return self.model.fc(features)
