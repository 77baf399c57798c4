"""Evaluation protocols and reports; all ranking goes through :func:`polyvse.metrics.retrieval_metrics`."""
from ..metrics import METRIC_KEYS, retrieval_metrics
from .corpus import evaluate_corpus, evaluate_embeddings
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
    "evaluate_corpus",
    "evaluate_embeddings",
    "markdown_table",
    "mean_std",
    "mean_std_table",
    "retrieval_metrics",
]
