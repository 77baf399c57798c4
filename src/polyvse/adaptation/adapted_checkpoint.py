"""A checkpoint with one more language: its new ``universal[lang]`` part added, nothing else touched.

The new checkpoint lists the language in ``languages`` (and in the model config's, which orders the parts: old
languages keep their index) and records how it was taught in ``adapted_languages`` (config.json):

    "adapted_languages": {"qu": {"method": "teacher", "pivot_lang": "en", "lines": 29000, ...}}

Every other weight is copied unchanged, so old languages' vectors and photo vectors are bit for bit the same
and an index built with the old checkpoint serves the new one (its photo fingerprint is the old one's; the model
fingerprint, which covers every part, is its own: ``polyvse.index.fingerprint``).
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from ..errors import CheckpointError
from ..model.checkpoint import Checkpoint
from ..model.parts import adapted_languages, is_subword_part, part_key, trained_languages

__all__ = ["adapted_languages", "trained_languages", "check_adaptable", "with_language_part", "part_key"]


def check_adaptable(ck: Checkpoint, lang: str) -> None:
    """A CheckpointError saying why ``lang`` cannot be added to ``ck``, if it cannot."""
    if ck.captions.vocab is not None:
        raise CheckpointError(
            "this is a word-level checkpoint (its text side learnt word vectors of its own vocabulary): a new "
            "language's words have no vectors in it, so there is no part to teach from sentence pairs. Adapting "
            "through a bilingual dictionary is not implemented; train a model that includes the language, or use "
            "a frozen-tower model (configs/f8k-full/polyvse-best.yaml)"
        )
    if not ck.model.config.universal_dim:
        raise CheckpointError(
            "this model has no per-language parts (model.universal_dim 0): one shared head reads every language "
            "its towers read, so a new language is served zero-shot already and there is no part to adapt"
        )
    if lang in trained_languages(ck):
        raise CheckpointError(
            f"the model trained on {lang!r}: adapting would replace a trained part; choose a "
            f"language outside {', '.join(trained_languages(ck))}"
        )


def with_language_part(ck: Checkpoint, lang: str, part: nn.Module, record: dict) -> Checkpoint:
    """A new Checkpoint: ``ck`` plus ``part`` as ``universal[lang]`` (replacing an earlier adaptation of it); a
    ``SubwordStudent``'s Linear is the part and its table and projection go beside it (``part_extras``)."""
    from ..modules.joint import JointEmbeddingModel

    check_adaptable(ck, lang)
    extras = {k: v for k, v in ck.part_extras.items() if not k.startswith(part_key(lang))}
    if is_subword_part(part):
        extras.update({part_key(lang) + name: t for name, t in part.extras().items()})
        part = part.linear
    old = ck.model.config
    languages = list(old.languages) + ([lang] if lang not in old.languages else [])
    model = JointEmbeddingModel(dataclasses.replace(old, languages=languages))
    state = {k: v for k, v in ck.model.state_dict().items() if not k.startswith(part_key(lang))}
    state.update({part_key(lang) + name: t.detach().to(torch.float32).cpu() for name, t in part.state_dict().items()})
    model.load_state_dict(state, strict=True)
    model.eval()
    return dataclasses.replace(
        ck,
        model=model,
        languages=list(ck.languages) + ([lang] if lang not in ck.languages else []),
        adapted_languages={**adapted_languages(ck), lang: dict(record)},
        part_extras=extras,
    )
