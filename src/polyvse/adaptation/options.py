"""The settings of `polyvse adapt`, torch-free: the command line reads them when it builds its parser, and every
`polyvse` command builds every parser (a search must not import torch for them)."""

from __future__ import annotations

from dataclasses import dataclass

#: map methods: the new language's tower vectors mapped onto the pivot's, then the pivot's part
MAP_METHODS = ("procrustes", "rcsls")
METHODS = ("teacher",) + MAP_METHODS
from ..model.parts import ZERO_SHOT_DEFAULT, ZERO_SHOT_OFF  # noqa: E402, F401  (polyvse adapt's --zero-shot choices)


@dataclass(frozen=True)
class TeacherSettings:
    epochs: int | None = None  # None: auto_epochs
    batch_size: int = 256
    lr: float = 5e-4
    # InfoNCE's temperature: chosen on val over qu, gn, es and ar (0.05 / 0.1 / 0.2 / 0.3; docs/decisions.md)
    temperature: float = 0.3
    mse_weight: float = 0.0
    seed: int = 0
    # a subword student (polyvse.model.subwords): hashed words + character n-grams beside the Linear part;
    # None: on for teacher learning (chosen on val for qu, gn, es and ar: docs/decisions.md)
    subwords: bool | None = None
    subword_buckets: int = 1 << 17
    subword_dim: int = 64
    subword_lr: float = 5e-3  # the table's (sparse Adam); the Linear and the projection learn at lr
    subword_word_ngrams: int = (
        3  # word pairs and triples in the bag too (1: words only); chosen on val, docs/decisions.md
    )
    # in training, each of a sentence's bag rows is left out with this probability, so the student cannot lean on
    # a few n-grams a line; checked on val for Quechua and not adopted (docs/decisions.md): 0 keeps the bag whole
    subword_dropout: float = 0.0
