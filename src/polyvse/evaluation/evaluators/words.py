"""Word-translation P@1 (CSLS, k = 10) of the model's word vectors into English on the held-out test part of the
MUSE dictionaries, for models that have word embeddings (protocol: :mod:`polyvse.evaluation.words`)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..words import has_word_vectors, word_translation_by_language
from .base import Evaluator, ScoreFn


class WordTranslationEvaluator(Evaluator):
    """``{lang: entry}``: P@1 on the held-out test part of the MUSE lexicon (``p_at_1``, ``n_words``) and, as
    ``train_p_at_1`` / ``n_train_words``, on its train part -- the pairs lexicon-trained configs were given, so
    for them a measure of what they kept, not of translation."""

    name = "words"
    method, k = "csls", 10  # the scorer word_translation_p_at_1 ranks by (as MUSE)

    def __init__(self, root: Path):
        self.root = Path(root)

    def skip_reason(self, model: Any) -> str | None:
        if not has_word_vectors(model):
            return "words needs word embeddings"
        return "words needs two languages" if len(model.languages) < 2 else None

    def scores(self, model: Any, lang: str | None = None) -> ScoreFn:
        """CSLS between source and pivot word vectors (what P@1 ranks by: ``method``)."""
        import functools

        from ...alignment.csls import csls_scores

        return functools.partial(csls_scores, k=self.k)

    def evaluate(self, model: Any) -> dict:
        # into English; a model without English (the Translator's de/fr) translates into its first language
        pivot = "en" if "en" in model.languages else model.languages[0]
        run = (lambda part: word_translation_by_language(model, self.root, pivot=pivot, part=part,
                                                         method=self.method, k=self.k,
                                                         skip_missing=True))
        test, train = run("test"), run("train")
        out = {}
        for lang in dict.fromkeys([*test, *train]):
            entry = dict(test.get(lang, {"pivot": pivot}))
            if lang in train:
                entry.update(train_p_at_1=train[lang]["p_at_1"], n_train_words=train[lang]["n_words"])
            out[lang] = entry
        return out

    def table(self, result: dict) -> str:
        from ..report import markdown_table

        return markdown_table(result, keys=["p_at_1", "n_words", "train_p_at_1", "n_train_words", "n_vocab"],
                              row_label="language -> en")
