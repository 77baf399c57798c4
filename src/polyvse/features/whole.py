"""A whole image backbone fine-tuned by polyvse, as the feature extractor of its checkpoint.

A backbone tail (:mod:`.tail`) trains on the cached map entering it, and its checkpoint meets photos through the
frozen cut extractor. Cut before the stem, that "map" would be the photo's pixels (3 x 260 x 260 floats for
Lite2, 811 KB a photo): nothing to cache, nor to hold for a gallery of photos. So a checkpoint whose whole
backbone trained (``image_tail: efficientnet-lite2:whole``, the trained weights stored as its image tail's, as a
tail's are) meets photos through :class:`FineTunedExtractor`: that trained backbone, frozen, behind the base
backbone's own evaluation preprocessing (resize, centre crop). Its features are the pooled 1280-d output, cached
like any backbone's (5 KB a photo) under a key that names the trained weights (``weights_tag`` ``ft-<digest>``):
two fine-tuned models never share cache entries, and a checkpoint whose weights no longer match the key it
recorded is refused. The model takes these features past its tail, into its head
(``JointEmbeddingModel.encode_image_features``); in training it reads decoded photos instead (the trainer's
pixel path).
"""

from __future__ import annotations

import copy

import torch

from .backbones import get_extractor
from .extractor import FeatureExtractor, freeze_for_inference_, weights_digest
from .tail import BackboneTail, split_whole_name

__all__ = ["FineTunedExtractor", "checkpoint_extractor", "weights_digest"]


class FineTunedExtractor(FeatureExtractor):
    """Photo -> the pooled output of a trained whole backbone (``name``: ``<backbone>:whole``), at the base
    backbone's preprocessing (``squash``: photos squashed to a square first, as that model trained)."""

    def __init__(self, name: str, backbone: BackboneTail, ten_crop: bool = False, squash: bool = False):
        base = split_whole_name(name)
        if base is None or not backbone.whole:
            raise ValueError(
                f"{name!r} names no whole backbone; use <backbone>:whole with the trained whole "
                "backbone (polyvse.features.tail.whole_of)"
            )
        if ten_crop:
            raise ValueError(f"{name}: a fine-tuned backbone takes the centre crop only (ten_crop: false)")
        self.name, self.ten_crop, self.dim = name, False, backbone.out_dim
        # the base backbone's preprocessing (its weights are not used: random ones are built faster)
        self.preprocess = get_extractor(base, squash=squash, _random_init=True).preprocess
        self.weights_tag = "ft-" + weights_digest(backbone)
        self.model = freeze_for_inference_(copy.deepcopy(backbone))  # a copy: the model's own stays trainable

    def _pooled(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)

    def _head(self, features: torch.Tensor) -> torch.Tensor:
        raise ValueError(f"{self.name}: a fine-tuned backbone has no ImageNet classifier")


def checkpoint_extractor(backbone: str, model, ten_crop: bool = False, squash: bool = False) -> FeatureExtractor:
    """The extractor whose features a checkpoint's model (a ``JointEmbeddingModel``) reads: its own trained
    backbone for ``<backbone>:whole``, else the registry's ``backbone``."""
    if split_whole_name(backbone) is not None:
        return FineTunedExtractor(backbone, model.image_tail, ten_crop=ten_crop, squash=squash)
    return get_extractor(backbone, ten_crop=ten_crop, squash=squash)
