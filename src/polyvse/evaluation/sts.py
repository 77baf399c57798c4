"""Semantic textual similarity: Pearson r x 100 between the cosine of two sentence embeddings and the
SemEval gold scores, as Gella et al. (2017, Table 4) and Calixto & Liu (2017, Table 1) report it.

Protocol (exact):

* every sentence is encoded on its own with the model's text encoder (``encode_text(texts, lang)``;
  English for these sets); identical sentences are encoded once;
* the predicted similarity of a pair is the cosine of the two embeddings (a zero vector has cosine 0
  with everything);
* the score is Pearson's r between the predictions and the gold scores over the pairs that have a
  gold score (unscored STS15 lines are skipped by :mod:`polyvse.data.sts`), times 100.

Pearson's r is invariant to affine rescaling, so no mapping of cosines onto the 0-5 gold scale is needed.
:class:`STSEvaluator` runs it on SemEval STS (2012 MSRvid, 2014 images, 2015 images) in English.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..data.sts import STS_SETS, load_sts
from .base import Evaluator, ScoreFn

__all__ = ["STSEvaluator", "STS_KEYS", "cosine_rows", "evaluate_sts", "pearson", "sts_pearson"]

#: Keys of :func:`evaluate_sts`, in the order of the papers' tables.
STS_KEYS: tuple[str, ...] = tuple(STS_SETS)

EncodeFn = Callable[[Sequence[str]], Any]


def cosine_rows(a: Any, b: Any) -> np.ndarray:
    """Row-wise cosine similarity of two (n, d) arrays; a zero row gives 0."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.ndim != 2 or a.shape != b.shape:
        raise ValueError(f"need two (n, d) embedding matrices of the same shape, got {a.shape} and {b.shape}")
    na = np.linalg.norm(a, axis=1)
    nb = np.linalg.norm(b, axis=1)
    denom = na * nb
    dots = np.einsum("ij,ij->i", a, b)
    return np.divide(dots, denom, out=np.zeros_like(dots), where=denom > 0)


def pearson(x: Any, y: Any) -> float:
    """Pearson's r of two 1-D samples (float64). NaN, with a warning, when ``x`` is constant.

    A constant ``y`` (gold) is a data error and raises ValueError.
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"need two 1-D samples of the same length, got shapes {x.shape} and {y.shape}")
    if x.size < 2:
        raise ValueError("Pearson's r needs at least two pairs")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("predicted similarities contain NaN or inf; check the model's embeddings")
    dy = y - y.mean()
    if not np.any(dy):
        raise ValueError("the gold scores are all equal: Pearson's r is undefined")
    dx = x - x.mean()
    sx = float(np.sqrt(dx @ dx))
    if sx == 0.0:
        warnings.warn(
            "all predicted similarities are equal: Pearson's r is undefined (NaN)", RuntimeWarning, stacklevel=2
        )
        return float("nan")
    r = float(dx @ dy) / (sx * float(np.sqrt(dy @ dy)))
    return max(-1.0, min(1.0, r))


def sts_pearson(encode_fn: EncodeFn, pairs: Sequence[tuple[str, str]], gold: Any) -> float:
    """Pearson r x 100 between cos(encode(s1), encode(s2)) and ``gold``.

    encode_fn: texts -> (len(texts), d) embeddings (numpy or anything ``np.asarray`` takes), e.g.
               ``lambda t: model.encode_text(t, "en")``. Called once, on the distinct sentences.
    pairs:     ((sentence1, sentence2), ...)
    gold:      (len(pairs),) gold similarity scores
    """
    gold = np.asarray(gold, dtype=np.float64)
    if gold.ndim != 1 or len(pairs) != gold.shape[0]:
        raise ValueError(f"{len(pairs)} pairs but gold has shape {gold.shape}")
    for i, p in enumerate(pairs):
        if len(p) != 2:
            raise ValueError(f"pair {i} has {len(p)} sentences, expected 2")
    unique = list(dict.fromkeys(s for p in pairs for s in p))
    emb = np.asarray(encode_fn(unique))
    if emb.ndim != 2 or emb.shape[0] != len(unique):
        raise ValueError(
            f"encode_fn returned shape {emb.shape} for {len(unique)} sentences; expected ({len(unique)}, dim)"
        )
    row = {s: i for i, s in enumerate(unique)}
    a = emb[[row[p[0]] for p in pairs]]
    b = emb[[row[p[1]] for p in pairs]]
    return 100.0 * pearson(cosine_rows(a, b), gold)


def evaluate_sts(
    model: Any, root: str | os.PathLike, *, lang: str = "en", sets: Iterable[str] = STS_KEYS
) -> dict[str, float]:
    """``{"sts12-msrvid": r, "sts14-images": r, "sts15-images": r}`` (Pearson r x 100) for ``model``.

    model: anything with ``encode_text(texts, lang) -> (n, d)`` (e.g. :class:`polyvse.model.torch_model.PolyvseModel`).
    root:  the data root holding ``sts/`` (or the ``sts`` folder itself).
    """
    out: dict[str, float] = {}
    for name in sets:
        data = load_sts(root, name)
        out[name] = sts_pearson(lambda texts: model.encode_text(list(texts), lang), data.pairs, data.gold)
    return out


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
        from .report import markdown_table

        return markdown_table({"Pearson r x 100": result}, keys=list(result), row_label="SemEval STS")
