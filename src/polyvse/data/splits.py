"""Which photos train and which evaluate: a corpus's official split, or k folds over its photos.

split "official"         the photos whose captions carry split "train", evaluated on those of ``eval_split``
split "fold<i>of<k>"     fold i of ``kfold_photo_splits(every photo, k, seed=0)``: the seed is fixed so that
                         training seeds vary the model, not the test set
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable

from ..errors import DataError
from .types import Corpus

__all__ = ["DEFAULT_EVAL_SPLIT", "OFFICIAL", "kfold_photo_splits", "parse_split", "resolve_split"]

OFFICIAL = "official"
DEFAULT_EVAL_SPLIT = "test"
_FOLD = re.compile(r"fold(\d+)of(\d+)")


def parse_split(split: str) -> tuple[int, int] | None:
    """None for the official split, ``(i, k)`` for ``fold<i>of<k>``; a DataError that names the split else."""
    if split == OFFICIAL:
        return None
    match = _FOLD.fullmatch(split) if isinstance(split, str) else None
    if match is None:
        raise DataError(f"split {split!r}: use 'official' or 'fold<i>of<k>', e.g. fold0of5")
    fold, k = int(match.group(1)), int(match.group(2))
    if not fold < k:
        raise DataError(f"split {split!r}: fold index must be in 0..{k - 1}")
    return fold, k


def kfold_photo_splits(photo_ids: Iterable[str], k: int = 5, seed: int = 0) -> list[tuple[list[str], list[str]]]:
    """k folds over the photos: [(train_ids, test_ids), ...]. Deterministic for (ids, k, seed) whatever
    the input order; every photo is in exactly one test fold; fold sizes differ by at most one."""
    ids = sorted(set(photo_ids))
    if k < 2:
        raise ValueError("k must be at least 2")
    if len(ids) < k:
        raise ValueError(f"cannot make {k} folds from {len(ids)} photos")
    order = list(ids)
    random.Random(seed).shuffle(order)
    folds = []
    for i in range(k):
        test = set(order[i::k])
        folds.append(([p for p in ids if p not in test], sorted(test)))
    return folds


def resolve_split(
    corpus: Corpus, split: str = OFFICIAL, eval_split: str = DEFAULT_EVAL_SPLIT
) -> tuple[set[str], set[str]]:
    """(train photo ids, evaluation photo ids) of ``corpus`` for ``split`` (module docstring)."""
    fold = parse_split(split)
    if fold is None:
        split_of = {c.photo_id: c.split for c in corpus.captions}
        train = {p for p, s in split_of.items() if s == "train"}
        evaluation = {p for p, s in split_of.items() if s == eval_split}
    else:
        tr, te = kfold_photo_splits(sorted({c.photo_id for c in corpus.captions}), k=fold[1], seed=0)[fold[0]]
        train, evaluation = set(tr), set(te)
    if train & evaluation:
        raise DataError(f"split {split!r}: {len(train & evaluation)} photos are in both train and evaluation")
    if not train or not evaluation:
        raise DataError(
            f"split {split!r} of {corpus.name}: {len(train)} training and {len(evaluation)} "
            "evaluation photos; both must be non-empty"
        )
    return train, evaluation
