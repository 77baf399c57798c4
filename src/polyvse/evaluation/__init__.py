"""Evaluation protocols and reports; all ranking goes through :func:`polyvse.metrics.retrieval_metrics`. The
evaluators (one class per protocol, each owning its scorer) are in :mod:`polyvse.evaluation.evaluators`."""
from ..metrics import METRIC_KEYS, retrieval_metrics
from .report import DEFAULT_KEYS, markdown_table, mean_std, mean_std_table
from .retrieval import (
    CROSS_LINGUAL_KEYS,
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
    "coco_5fold_metrics",
    "coco_fold_metrics",
    "cosine_scores",
    "cross_lingual_retrieval",
    "evaluate_by_language",
    "markdown_table",
    "mean_std",
    "mean_std_table",
    "retrieval_metrics",
]
