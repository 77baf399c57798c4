"""SemEval STS (2012 MSRvid, 2014 images, 2015 images): Pearson r x 100 of the cosine of the English text
embeddings, as Gella et al. and Calixto & Liu report (protocol: :mod:`polyvse.evaluation.sts`)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..sts import cosine_rows, evaluate_sts
from .base import Evaluator, ScoreFn


class STSEvaluator(Evaluator):
    """``{set: r x 100}`` for a model that reads ``lang`` (English)."""

    name = "sts"

    def __init__(self, root: Path, lang: str = "en"):
        self.root, self.lang = Path(root), lang

    def skip_reason(self, model: Any) -> str | None:
        return None if self.lang in model.languages else f"sts needs {self.lang}"

    def scores(self, model: Any, lang: str | None = None) -> ScoreFn:
        return cosine_rows  # row-wise: the pairs' similarities

    def evaluate(self, model: Any) -> dict:
        return evaluate_sts(model, self.root, lang=self.lang)

    def table(self, result: dict) -> str:
        from ..report import markdown_table

        return markdown_table({"Pearson r x 100": result}, keys=list(result), row_label="SemEval STS")
