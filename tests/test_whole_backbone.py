"""Fine-tuning the whole image backbone: the whole EfficientNet-Lite as a trainable tail
(polyvse.features.tail.whole_of), and as its checkpoint's extractor (polyvse.features.whole)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from polyvse.features.backbones import backbone_tail, get_extractor
from polyvse.features.extractor import UnknownBackboneError
from polyvse.features.images import load_image
from polyvse.features.tail import whole_of
from polyvse.features.whole import FineTunedExtractor


@pytest.fixture(scope="module")
def lite0():
    return get_extractor("efficientnet-lite0")


@pytest.fixture(scope="module")
def photo_paths(shared_data):
    paths = sorted((shared_data / "flickr8k").rglob("*.jpg"))[:2]
    assert paths, "no Flickr8K photos in the shared data"
    return paths


def test_the_whole_backbone_starts_as_the_frozen_extractor(lite0, photo_paths):
    photos = [load_image(p) for p in photo_paths]
    whole = whole_of(lite0.model, (3, 224, 224))
    assert whole.whole and all(p.requires_grad for p in whole.parameters())
    with torch.no_grad():
        pooled = whole(torch.stack([lite0.transform(p) for p in photos])).numpy()
    np.testing.assert_allclose(pooled, lite0.extract(photos), atol=1e-5)
    # its architecture from its name takes its weights, as a tail's does
    arch = backbone_tail("efficientnet-lite0:whole", (3, 224, 224))
    assert arch.whole and list(arch.state_dict()) == list(whole.state_dict())
    # as an extractor: the same features, under a key naming the weights
    extractor = FineTunedExtractor("efficientnet-lite0:whole", whole)
    np.testing.assert_allclose(extractor.extract(photos), pooled, atol=1e-5)
    assert extractor.weights_tag.startswith("ft-") and extractor.key != lite0.key
    with pytest.raises(UnknownBackboneError, match="polyvse.load"):
        get_extractor("efficientnet-lite0:whole")
