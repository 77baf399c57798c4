"""Word-translation P@1 of a trained model's word representations against the MUSE dictionaries.

For every language ``l`` of the model other than the pivot (English), the words of ``l`` in the model's
vocabulary are queried against the pivot's words (CSLS, k = 10 as MUSE), on the TEST part of the MUSE
``l``-``en`` dictionary (:func:`polyvse.alignment.muse_lexicon`: the source words of frequency rank
5000-6499, as the reconstructed ``*.5000-6500.txt`` files) filtered to the vocabulary -- a training
vocabulary, so the dictionary shrinks to the words the model has seen in captions. Models that train on a
lexicon (AME's alignment and lexicon initialisation, the Translator's map) use its TRAIN part only, which
has none of these source words, so the number measures translation of words no lexicon gave the model.

The vectors are what the sentence encoder reads (:meth:`polyvse.modules.text_encoder.TextEncoder.word_vectors`):
the word embeddings, after MULE's per-language universal projection when the model has one. Models without
word embeddings (frozen pretrained sentence towers) have no entry. :class:`WordTranslationEvaluator` reports it
on the test part and, for what lexicon-trained configs kept, on the train part.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import DataError
from .base import Evaluator, ScoreFn

__all__ = ["WordTranslationEvaluator", "has_word_vectors", "word_translation_by_language", "words_of"]


def has_word_vectors(model: Any) -> bool:
    """True for a :class:`polyvse.model.torch_model.PolyvseModel` whose text encoder exposes word vectors."""
    enc = getattr(getattr(model, "model", None), "text_encoder", None)
    return enc is not None and callable(getattr(enc, "word_vectors", None)) and hasattr(model, "captions")


def words_of(vocab: Any, lang: str) -> tuple[list[int], dict[str, int]]:
    """(vocabulary ids of the ``lang`` words, ``{word: position in that list}``) of a language-tagged vocabulary."""
    prefix = f"{lang}:"
    ids = [i for i, t in enumerate(vocab.tokens) if t.startswith(prefix)]
    return ids, {vocab.id_to_token(i)[len(prefix) :]: j for j, i in enumerate(ids)}


def word_translation_by_language(
    model: Any,
    root: str | os.PathLike,
    *,
    pivot: str = "en",
    part: str = "test",
    method: str = "csls",
    k: int = 10,
    min_pairs: int = 10,
    skip_missing: bool = False,
) -> dict[str, dict]:
    """``{lang: {"p_at_1": percent, "n_words": distinct source words, "n_vocab": words of lang}}``.

    ``part``: "test" (the default; held out from every lexicon-trained model) or "train" (what such models
    were given: a check of how well they kept it). Languages whose filtered dictionary has fewer than
    ``min_pairs`` source words are left out (too few to mean anything); a missing MUSE file is a
    :class:`DataError` naming it, or with ``skip_missing`` leaves the language out (MUSE has no dictionary for
    some pairs, e.g. cs-de). Entries name their ``pivot``.
    """
    if not has_word_vectors(model):
        raise DataError(
            "this model has no word embeddings (e.g. a frozen pretrained sentence encoder): "
            "word translation P@1 does not apply"
        )
    import torch  # the word vectors are the torch text encoder's (a torch model's: has_word_vectors)

    with torch.no_grad():
        return _p_at_1_by_language(model, root, pivot, part, method, k, min_pairs, skip_missing)


def _p_at_1_by_language(
    model: Any, root, pivot: str, part: str, method: str, k: int, min_pairs: int, skip_missing: bool
) -> dict[str, dict]:
    import torch

    from ..alignment import filter_lexicon, muse_lexicon, muse_paths, word_translation_p_at_1

    enc = model.model.text_encoder
    vocab = model.captions.vocab
    langs = list(model.languages)
    if pivot not in langs:
        raise DataError(f"the model has no {pivot!r} words to translate into (languages: {', '.join(langs)})")
    tgt_ids, tgt_words = words_of(vocab, pivot)
    tgt = enc.word_vectors(torch.tensor(tgt_ids, dtype=torch.long), pivot).float()
    out: dict[str, dict] = {}
    for lang in langs:
        if lang == pivot:
            continue
        if skip_missing and not muse_paths(root, lang, pivot, "full", check=False).is_file():
            continue
        src_ids, src_words = words_of(vocab, lang)
        pairs, _ = filter_lexicon(muse_lexicon(root, lang, pivot, part), src_words, tgt_words)
        n_words = len({int(s) for s in pairs[:, 0].tolist()}) if len(pairs) else 0
        if n_words < min_pairs:
            continue
        src = enc.word_vectors(torch.tensor(src_ids, dtype=torch.long), lang).float()
        kk = max(1, min(k, src.shape[0], tgt.shape[0]))
        p1 = word_translation_p_at_1(src, tgt, pairs, method=method, k=kk)
        out[lang] = {"p_at_1": round(p1, 2), "n_words": n_words, "n_vocab": len(src_ids), "pivot": pivot}
    return out


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

        from ..csls.vocabulary import csls_scores

        return functools.partial(csls_scores, k=self.k)

    def evaluate(self, model: Any) -> dict:
        # into English; a model without English (the Translator's de/fr) translates into its first language
        pivot = "en" if "en" in model.languages else model.languages[0]
        run = lambda part: word_translation_by_language(
            model, self.root, pivot=pivot, part=part, method=self.method, k=self.k, skip_missing=True
        )
        test, train = run("test"), run("train")
        out = {}
        for lang in dict.fromkeys([*test, *train]):
            entry = dict(test.get(lang, {"pivot": pivot}))
            if lang in train:
                entry.update(train_p_at_1=train[lang]["p_at_1"], n_train_words=train[lang]["n_words"])
            out[lang] = entry
        return out

    def table(self, result: dict) -> str:
        from .report import markdown_table

        return markdown_table(
            result, keys=["p_at_1", "n_words", "train_p_at_1", "n_train_words", "n_vocab"], row_label="language -> en"
        )
