"""Image features: safe photo loading, frozen CNN backbones, a content-addressed feature cache.

    from polyvse.features import get_extractor, extract_features
    result = extract_features(paths, get_extractor("efficientnet-lite0"), cache_dir)
    result.features  # float32 (n_ok, 1280), rows in input order; result.failures lists bad photos

Torch is imported only when the extractor or cache parts are used, so ``load_image`` stays cheap
for callers (e.g. an upload handler) that only need to validate photos, and Pillow only when
``load_image`` is, so a text query's process never imports it.
"""

from __future__ import annotations

from ..util.lazy import lazy_attributes
from .limits import DEFAULT_MAX_PIXELS

__all__ = [
    "DEFAULT_MAX_PIXELS",
    "FeatureCache",
    "FeatureExtractor",
    "FeatureResult",
    "available_backbones",
    "extract_features",
    "get_extractor",
    "load_image",
    "read_image_bytes",
]

__getattr__ = lazy_attributes(
    __name__,
    {
        "FeatureExtractor": ".extractor",
        **dict.fromkeys(["load_image", "read_image_bytes"], ".images"),
        **dict.fromkeys(["available_backbones", "get_extractor"], ".backbones"),
        **dict.fromkeys(["FeatureCache", "FeatureResult", "extract_features"], ".cache"),
    },
)
