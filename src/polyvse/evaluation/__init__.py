"""Evaluation protocols and reports; all ranking goes through :func:`polyvse.evaluation.ranking.retrieval_metrics`.

Each protocol's module holds its functions and its evaluator (one class on :class:`base.Evaluator`, owning its
scorer): :mod:`.retrieval`, :mod:`.crosslingual`, :mod:`.sts`, :mod:`.words`, :mod:`.languages`;
:mod:`.tasks` names them for ``polyvse evaluate --task``."""

from .base import Evaluator, search_scores
from .ranking import METRIC_KEYS, retrieval_metrics
from .report import DEFAULT_KEYS, markdown_table, mean_std, mean_std_table
from .retrieval import (
    CROSS_LINGUAL_KEYS,
    Gallery,
    RetrievalEvaluator,
    coco_5fold_metrics,
    coco_fold_metrics,
    cosine_scores,
    cross_lingual_retrieval,
    evaluate_by_language,
)

__all__ = [
    "CROSS_LINGUAL_KEYS",
    "DEFAULT_KEYS",
    "METRIC_KEYS",
    "Evaluator",
    "Gallery",
    "RetrievalEvaluator",
    "coco_5fold_metrics",
    "coco_fold_metrics",
    "cosine_scores",
    "cross_lingual_retrieval",
    "evaluate_by_language",
    "markdown_table",
    "mean_std",
    "mean_std_table",
    "retrieval_metrics",
    "search_scores",
]
