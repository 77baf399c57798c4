"""Word-translation P@1 of a trained model's word representations against the MUSE dictionaries.

For every language ``l`` of the model other than the pivot (English), the words of ``l`` in the model's
vocabulary are queried against the pivot's words (CSLS, k = 10 as MUSE), on the TEST part of the MUSE
``l``-``en`` dictionary (:func:`polyvse.alignment.muse_lexicon`: the source words of frequency rank
5000-6499, as the reconstructed ``*.5000-6500.txt`` files) filtered to the vocabulary -- a training
vocabulary, so the dictionary shrinks to the words the model has seen in captions. Models that train on a
lexicon (AME's alignment and lexicon initialisation, the Translator's map) use its TRAIN part only, which
has none of these source words, so the number measures translation of words no lexicon gave the model.

The vectors are what the sentence encoder reads (:meth:`polyvse.models.text_encoder.TextEncoder.word_vectors`):
the word embeddings, after MULE's per-language universal projection when the model has one. Models without
word embeddings (frozen pretrained sentence towers) have no entry.
"""
from __future__ import annotations

import os
from typing import Any

import torch

from ..alignment import filter_lexicon, muse_lexicon, muse_paths, word_translation_p_at_1
from ..errors import DataError

__all__ = ["has_word_vectors", "word_translation_by_language", "words_of"]


def has_word_vectors(model: Any) -> bool:
    """True for a :class:`polyvse.model.torch_model.PolyvseModel` whose text encoder exposes word vectors."""
    enc = getattr(getattr(model, "model", None), "text_encoder", None)
    return enc is not None and callable(getattr(enc, "word_vectors", None)) and hasattr(model, "captions")


def words_of(vocab: Any, lang: str) -> tuple[list[int], dict[str, int]]:
    """(vocabulary ids of the ``lang`` words, ``{word: position in that list}``) of a language-tagged vocabulary."""
    prefix = f"{lang}:"
    ids = [i for i, t in enumerate(vocab.tokens) if t.startswith(prefix)]
    return ids, {vocab.id_to_token(i)[len(prefix):]: j for j, i in enumerate(ids)}


@torch.no_grad()
def word_translation_by_language(model: Any, root: str | os.PathLike, *, pivot: str = "en", part: str = "test",
                                 method: str = "csls", k: int = 10, min_pairs: int = 10,
                                 skip_missing: bool = False) -> dict[str, dict]:
    """``{lang: {"p_at_1": percent, "n_words": distinct source words, "n_vocab": words of lang}}``.

    ``part``: "test" (the default; held out from every lexicon-trained model) or "train" (what such models
    were given: a check of how well they kept it). Languages whose filtered dictionary has fewer than
    ``min_pairs`` source words are left out (too few to mean anything); a missing MUSE file is a
    :class:`DataError` naming it, or with ``skip_missing`` leaves the language out (MUSE has no dictionary for
    some pairs, e.g. cs-de). Entries name their ``pivot``.
    """
    if not has_word_vectors(model):
        raise DataError("this model has no word embeddings (e.g. a frozen pretrained sentence encoder): "
                        "word translation P@1 does not apply")
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
