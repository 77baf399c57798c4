"""The one interface of polyvse's evaluators: a class per protocol, built with its data and options, called on a
model. Each owns its scorer (:meth:`Evaluator.scores`), so no caller pairs a protocol with a scoring by hand.

    result = SomeEvaluator(root, ...)(model)    # None where the protocol does not apply to the model
    print(evaluator.table(result))

Used by the trainer (its split), `polyvse evaluate` (every ``--task``) and the zoo (``tasks.json``).
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

ScoreFn = Callable[[Any, Any], Any]


def search_scores(model: Any, lang: str | None = None) -> ScoreFn:
    """``(images, texts) -> scores`` ranked as `polyvse search` ranks for captions in ``lang``: CSLS against the
    checkpoint's banks when it carries them (``lang``'s caption bank, the pooled one for a language without),
    else the model's similarity (``model.retrieval_scores``; a numpy model (no such method) with CSLS banks:
    :func:`numpy_csls_scores` on them; else ``model.similarity``)."""
    scores = getattr(model, "retrieval_scores", None)
    if scores is not None:
        return functools.partial(scores, lang=lang)
    from ..csls.search import SearchHubness

    banks = getattr(model, "hubness", None)
    if isinstance(banks, SearchHubness):
        return functools.partial(numpy_csls_scores, banks, lang=lang)
    return model.similarity


def numpy_csls_scores(banks: Any, images: Any, texts: Any, lang: str | None = None) -> np.ndarray:
    """The (n_images, n_texts) CSLS matrix of photos against captions in ``lang`` on a numpy model's banks
    (``polyvse.csls.search.SearchHubness``): what ``polyvse.csls.banks.HubnessBanks.scores`` computes in torch,
    on unit float32 rows."""
    from ..csls.scoring import csls
    from ..util.arrays import normalize_rows

    img, txt = normalize_rows(np.asarray(images)), normalize_rows(np.asarray(texts))
    return csls(img @ txt.T, banks.photo_penalty(img, lang)[:, None], banks.caption_penalty(txt)[None, :])


class Evaluator(ABC):
    """A protocol: ``name`` (its ``polyvse evaluate --task``), :meth:`evaluate`, and what goes with it."""

    name: ClassVar[str]

    def skip_reason(self, model: Any) -> str | None:
        """Why the protocol does not apply to ``model`` (None: it does)."""
        return None

    def scores(self, model: Any, lang: str | None = None) -> ScoreFn:
        """The scorer the protocol ranks or correlates with; by default as search ranks."""
        return search_scores(model, lang)

    @abstractmethod
    def evaluate(self, model: Any) -> dict:
        """The protocol's result for ``model`` (a JSON-ready dict)."""

    def __call__(self, model: Any) -> dict | None:
        return None if self.skip_reason(model) else self.evaluate(model)

    def table(self, result: dict) -> str:
        """``result`` as a markdown table."""
        from .report import markdown_table

        return markdown_table(result)
