"""The backbone registry: ``get_extractor(name)`` builds a ready extractor; built-in backbones register on
first use, so importing this module loads no network code."""

from __future__ import annotations

from collections.abc import Callable

from .concat import SEPARATOR, ConcatExtractor, split_backbone_name
from .extractor import FeatureExtractor, UnknownBackboneError
from .tail import TAIL_MARK, BackboneCutExtractor, BackboneTail, parse_tail_name, split_whole_name, tail_of, whole_of

__all__ = ["available_backbones", "backbone_tail", "get_extractor", "register_backbone"]

_REGISTRY: dict[str, Callable[..., FeatureExtractor]] = {}


def register_backbone(name: str, factory: Callable[..., FeatureExtractor]) -> None:
    """Make ``get_extractor(name, ...)`` call ``factory(ten_crop=..., **kwargs)``."""
    _REGISTRY[name] = factory


def _ensure_builtin() -> None:
    if "efficientnet-lite0" not in _REGISTRY:
        from .efficientnet import EfficientNetLite0Extractor, EfficientNetLite1Extractor, EfficientNetLite2Extractor
        from .resnet import ResNet152Extractor

        for cls in (EfficientNetLite0Extractor, EfficientNetLite1Extractor, EfficientNetLite2Extractor):
            register_backbone(cls.name, cls)
        register_backbone("resnet152", ResNet152Extractor)


def available_backbones() -> list[str]:
    """Names :func:`get_extractor` accepts; the first is the default."""
    _ensure_builtin()
    return list(_REGISTRY)


def get_extractor(
    name: str = "efficientnet-lite0", ten_crop: bool = False, squash: bool = False, **kwargs
) -> FeatureExtractor | ConcatExtractor | BackboneCutExtractor:
    """Build a ready-to-use (eval mode, frozen) extractor.

    ``efficientnet-lite0`` / ``-lite1`` / ``-lite2`` (1280-d) ship their ImageNet weights in pip packages and
    work offline;
    ``a+b`` concatenates the features of backbones ``a`` and ``b`` (each from its own cache);
    ``efficientnet-lite2:tail1`` is that backbone cut before its last block (the flattened map entering it:
    the input of a trainable tail, polyvse.features.tail);
    ``resnet152`` (2048-d) needs torchvision's ImageNet weights in the torch hub cache or a
    network connection (otherwise :class:`WeightsUnavailableError` says what to do).
    ``squash``: resize photos to a square ignoring their aspect ratio (:class:`~.extractor.Preprocess`), for
    models trained on squashed photos.
    """
    _ensure_builtin()
    if split_whole_name(name) is not None:  # its weights are a checkpoint's (polyvse.features.whole)
        raise UnknownBackboneError(
            f"{name!r} is a whole backbone fine-tuned by polyvse: its trained weights are in "
            "its checkpoint, which embeds photos with them (polyvse.load)"
        )
    if SEPARATOR in name:  # several backbones side by side (polyvse.features.concat)
        return ConcatExtractor(
            [get_extractor(part, ten_crop=ten_crop, squash=squash, **kwargs) for part in split_backbone_name(name)]
        )
    if TAIL_MARK in name:  # the map entering the last blocks, for a trainable tail (polyvse.features.tail)
        base, blocks = parse_tail_name(name)
        return BackboneCutExtractor(get_extractor(base, ten_crop=ten_crop, squash=squash, **kwargs), blocks)
    try:
        factory = _REGISTRY[name]
    except KeyError:
        raise UnknownBackboneError(f"unknown image backbone {name!r}; choose one of: {', '.join(_REGISTRY)}") from None
    ext = factory(ten_crop=ten_crop, **kwargs)
    if squash:
        ext.preprocess = ext.preprocess.squashed()
    return ext


def backbone_tail(name: str, in_shape) -> BackboneTail:
    """The trainable tail's architecture for ``<backbone>:tail<K>`` (or the whole backbone's, for
    ``<backbone>:whole``), with untrained weights (a checkpoint's state, or
    :meth:`~polyvse.features.tail.BackboneCutExtractor.tail_module`, fills them)."""
    whole = split_whole_name(name)
    if whole is not None:
        return whole_of(get_extractor(whole, _random_init=True).model, in_shape)
    base, blocks = parse_tail_name(name)
    return tail_of(get_extractor(base, _random_init=True).model, blocks, in_shape)
