"""Caption-caption retrieval R@1/5/10 both ways (en-de, en-fr, en-cs, en-zh) on the F8K-ML test photos and
Multi30K test_2016, leaving out the pairs of the model's training photos (protocol:
:mod:`polyvse.evaluation.crosslingual`). Scored by the cosine of the text embeddings."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Iterable

from ..crosslingual import DEFAULT_PAIRS, crosslingual_table, evaluate_crosslingual
from ..retrieval import cosine_scores
from .base import Evaluator, ScoreFn

log = logging.getLogger("polyvse.evaluation")


def training_photo_ids(model: Any, root: Path) -> set[str] | None:
    """Photos the checkpoint trained on, recomputed from the config in its training metadata (None when a
    checkpoint carries no such metadata, e.g. one written by other code).

    The trainer records its config in the flat form (``polyvse_train.config.TrainConfig.to_dict``); of it, the
    data fields ``dataset``, ``split`` and ``eval_split`` say which photos trained, with the trainer's defaults
    for one that a config saved before the field existed lacks."""
    from ...data.registry import DEFAULT_DATASET, load_dataset
    from ...data.splits import DEFAULT_EVAL_SPLIT, OFFICIAL, resolve_split

    saved = (getattr(getattr(model, "checkpoint", None), "training", None) or {}).get("config")
    if not saved:
        return None
    train, _ = resolve_split(load_dataset(saved.get("dataset", DEFAULT_DATASET), root),
                             saved.get("split", OFFICIAL), saved.get("eval_split", DEFAULT_EVAL_SPLIT))
    return train


class CrossLingualEvaluator(Evaluator):
    """``{corpus: {"a-b": metrics}}``; ``exclude_photo_ids`` None: the checkpoint's own training photos."""

    name = "crosslingual"

    def __init__(self, root: Path, exclude_photo_ids: Iterable[str] | None = None,
                 pairs: Iterable[str] = DEFAULT_PAIRS):
        self.root, self.exclude_photo_ids, self.pairs = Path(root), exclude_photo_ids, tuple(pairs)

    def scores(self, model: Any, lang: str | None = None) -> ScoreFn:
        return cosine_scores

    def evaluate(self, model: Any) -> dict:
        excluded = self.exclude_photo_ids
        if excluded is None:
            excluded = training_photo_ids(model, self.root)
            if excluded is None:
                log.warning("the checkpoint does not say which photos it trained on: no pair is excluded")
        return evaluate_crosslingual(model, self.root, self.pairs, exclude_photo_ids=excluded or (),
                                     score_fn=self.scores(model))

    def table(self, result: dict) -> str:
        return crosslingual_table(result)
