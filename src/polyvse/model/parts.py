"""Which language reads through which per-language part, torch-free: the torch model
(``polyvse.model.torch_model``) and the numpy query path (``polyvse.model.numpy_serving.tower_query``) both read a checkpoint's
parts through these; the zero-shot fallback's choices too."""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import CheckpointError

#: the part a language without one is read through: the mean of the trained parts, or one trained language's
ZERO_SHOT_DEFAULT = "mean"
ZERO_SHOT_OFF = "off"

__all__ = [
    "ZERO_SHOT_DEFAULT",
    "ZERO_SHOT_OFF",
    "adapted_languages",
    "trained_languages",
    "part_key",
    "check_zero_shot",
    "is_subword_part",
    "zero_shot_option",
]


def adapted_languages(ck) -> dict:
    """{code: record} of the languages taught after training (a Checkpoint, a CheckpointConfig or a loaded
    model)."""
    ck = getattr(ck, "checkpoint", ck)
    return dict(getattr(ck, "adapted_languages", None) or {})


def trained_languages(ck) -> list[str]:
    """The languages the model trained on (its languages less the adapted ones)."""
    ck = getattr(ck, "checkpoint", ck)
    adapted = adapted_languages(ck)
    return [lang for lang in ck.languages if lang not in adapted]


def part_key(lang: str) -> str:
    """The state-dict prefix of a language's part."""
    return f"text_encoder.universal.{lang}."


def is_subword_part(part) -> bool:
    """Whether a language part is a ``SubwordStudent`` (it carries its ``SubwordSpec``), which also reads the
    sentences; told apart by its spec so that callers need not import torch or regex for the check."""
    return getattr(part, "spec", None) is not None


def check_zero_shot(how: str, trained: Iterable[str]) -> str:
    """``how`` normalised, or a CheckpointError naming the choices."""
    trained = list(trained)
    norm = (how or "").strip().lower() if isinstance(how, str) else ""
    if norm in ("mean", ZERO_SHOT_OFF) or norm in trained:
        return norm
    raise CheckpointError(
        f"zero-shot fallback {how!r}: choose 'mean' (the mean of the trained languages' parts), "
        f"a trained language ({', '.join(trained)}) or 'off'"
    )


def zero_shot_option(how: str | None, checkpoint, per_language_parts: bool) -> str:
    """A load's ``zero_shot`` option (``polyvse.load``, the numpy query models) normalised: ZERO_SHOT_DEFAULT when
    None, checked against the trained languages when the model has per-language parts to borrow from."""
    how = how or ZERO_SHOT_DEFAULT
    return check_zero_shot(how, trained_languages(checkpoint)) if per_language_parts else how
