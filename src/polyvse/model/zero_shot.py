"""Zero-shot languages: a language the frozen towers read but the model has no per-language part for.

A frozen-tower model with per-language parts (``universal[lang]``, ``PretrainedTextEncoder``) maps a caption's
tower vector through its language's Linear part, then the shared head. A language without a part borrows a
declared fallback part:

    "mean"   the mean of every trained language's part (weights and biases): since the part is linear, the mean
             of what each trained part would make of the sentence -- no language favoured
    "<code>" a trained language's own part, e.g. "en" (the language the teacher side speaks)

The fallback is a load option (``polyvse.load(path, zero_shot=...)``), ``ZERO_SHOT_DEFAULT`` when not given; "off"
refuses every language the model has no part for, as models did before. A model without per-language parts
(``universal_dim`` 0) reads every language its towers read through its one shared head: nothing to borrow.
Adapted languages (``polyvse adapt``) have their own part and never take the fallback; they are also left out
of the mean, which is over the languages the model trained on.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable

import torch
from torch import nn

from ..errors import CheckpointError
from .parts import ZERO_SHOT_DEFAULT, ZERO_SHOT_OFF, check_zero_shot, is_subword_part

__all__ = ["ZERO_SHOT_DEFAULT", "ZERO_SHOT_OFF", "fallback_part", "encode_through_part", "check_zero_shot"]

#: the fallback of ``polyvse.load`` when none is given (to be chosen on val: scripts/adapt_curves.py measures each)


def fallback_part(text_encoder, how: str, trained: Iterable[str]) -> nn.Linear:
    """A new Linear holding the fallback part ``how`` ("mean" or a trained language) of a pretrained text branch
    with per-language parts; ``trained``: the languages the mean runs over."""
    trained = list(trained)
    how = check_zero_shot(how, trained)
    if how == ZERO_SHOT_OFF:
        raise CheckpointError("zero-shot fallback 'off' has no part")
    parts = text_encoder.universal
    if how != "mean":
        return copy.deepcopy(parts[how])
    first = parts[trained[0]]
    out = nn.Linear(first.in_features, first.out_features).to(first.weight.device)
    with torch.no_grad():
        out.weight.copy_(torch.stack([parts[lang].weight for lang in trained]).mean(0))
        out.bias.copy_(torch.stack([parts[lang].bias for lang in trained]).mean(0))
    return out


def encode_through_part(model, vecs: torch.Tensor, part: nn.Module, texts=None) -> torch.Tensor:
    """Joint-space embeddings of tower vectors ``(n, pretrained_dim)`` through ``part`` and then the model's shared
    head: what ``JointEmbeddingModel.encode_text_ids`` computes for a language whose part is ``part``. A subword
    student (``SubwordStudent``) also reads the sentences themselves, ``texts``."""
    vecs = model.text_encoder.sentence_vectors(vecs.to(model.device).float())  # through an e5 tail, if any
    if is_subword_part(part):
        if texts is None:
            raise ValueError("a subword part reads the sentences: pass texts")
        return model._joint(model.text_encoder.head(part(vecs, texts)))
    return model._joint(model.text_encoder.head(part(vecs)))
