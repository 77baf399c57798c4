"""polyvse's evaluators by task name: one class per protocol on :class:`Evaluator` (``evaluator(model)``: the
result, or None where the protocol does not apply), each in its protocol's module with its scorer. ``polyvse evaluate --task NAME`` runs
``EVALUATORS[NAME]``; the zoo's ``tasks.json`` holds :data:`MODEL_TASKS`' results."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .base import Evaluator
from .crosslingual import CrossLingualEvaluator
from .languages import LanguagesEvaluator
from .retrieval import RetrievalEvaluator
from .sts import STSEvaluator
from .words import WordTranslationEvaluator

EVALUATORS: dict[str, type[Evaluator]] = {
    cls.name: cls
    for cls in (RetrievalEvaluator, CrossLingualEvaluator, STSEvaluator, WordTranslationEvaluator, LanguagesEvaluator)
}
#: the tasks of a model that need no dataset of the user's (text-only; the zoo's tasks.json)
MODEL_TASKS = ("crosslingual", "sts", "words")


def run_tasks(model: Any, root: Path, tasks: Iterable[str] = MODEL_TASKS, exclude_photo_ids=None) -> dict:
    """``{task: result}`` of each of :data:`MODEL_TASKS` named; a task that does not apply gives None."""
    tasks = list(tasks)
    unknown = sorted(set(tasks) - set(MODEL_TASKS))
    if unknown:
        raise ValueError(f"unknown task(s) {', '.join(unknown)}; known: {', '.join(MODEL_TASKS)}")
    made = {
        "crosslingual": lambda: CrossLingualEvaluator(root, exclude_photo_ids),
        "sts": lambda: STSEvaluator(root),
        "words": lambda: WordTranslationEvaluator(root),
    }
    return {task: made[task]()(model) for task in tasks}


__all__ = ["EVALUATORS", "MODEL_TASKS", "run_tasks"]
