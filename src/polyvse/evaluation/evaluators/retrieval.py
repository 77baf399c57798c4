"""Image-sentence retrieval per caption language: one gallery per language (the photos with a caption in it),
ranked as search ranks (CSLS against the checkpoint's banks where it carries them). On your own photos and captions
(:meth:`RetrievalEvaluator.on_corpus`) every language the model serves is scored -- trained, adapted or zero-shot
(:func:`polyvse.languages.serving_status`) -- each caption embedded as a query in its language is
(``model.encode_text``: an adapted language's subword student, a zero-shot language's fallback part)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ...data.types import Corpus
from ...errors import DataError
from ...models.text_input import caption_inputs
from ..retrieval import evaluate_by_language
from .base import Evaluator


@dataclass
class Gallery:
    """Image features, each caption's model input, its row of the features and its language (``notes``: what
    building it left out, reported beside the metrics). ``caption_text``: where given, the captions of languages the
    model did not train on (None at a trained language's row, whose ids are in ``caption_ids``), embedded as search
    embeds a query in their language."""

    image_feats: Any
    caption_ids: list
    caption_image: np.ndarray
    caption_lang: list[str]
    notes: dict = field(default_factory=dict)
    caption_text: list | None = None

    def caption_embeddings(self, model: Any) -> np.ndarray:
        """Every caption's embedding, in order: trained languages through their ids, the others through
        ``model.encode_text`` by language."""
        if self.caption_text is None:
            return model.encode_ids(self.caption_ids, self.caption_lang)  # models with per-language parts need it
        by_ids = [i for i, t in enumerate(self.caption_text) if t is None]
        parts: list[tuple[list[int], np.ndarray]] = []
        if by_ids:
            parts.append((by_ids, model.encode_ids([self.caption_ids[i] for i in by_ids],
                                                   [self.caption_lang[i] for i in by_ids])))
        for lang in sorted({self.caption_lang[i] for i, t in enumerate(self.caption_text) if t is not None}):
            rows = [i for i, t in enumerate(self.caption_text) if t is not None and self.caption_lang[i] == lang]
            parts.append((rows, model.encode_text([self.caption_text[i] for i in rows], lang)))
        out = np.zeros((len(self.caption_lang), parts[0][1].shape[1]), dtype=np.float32)
        for rows, emb in parts:
            out[rows] = emb
        return out


class RetrievalEvaluator(Evaluator):
    """``{"languages": {lang: metrics}, **notes}`` of a model on a gallery: given as features (the trainer's split,
    :meth:`on_features`) or built for the model from a corpus's photos and captions (:meth:`on_corpus`)."""

    name = "retrieval"

    def __init__(self, gallery: Callable[[Any], Gallery], languages: list[str] | None = None):
        self.gallery, self.languages = gallery, languages

    @classmethod
    def on_features(cls, image_feats, caption_ids: list[list[int]], caption_image: np.ndarray,
                    caption_lang: list[str], languages: list[str] | None) -> RetrievalEvaluator:
        gallery = Gallery(image_feats, caption_ids, np.asarray(caption_image), list(caption_lang))
        return cls(lambda model: gallery, languages)

    @classmethod
    def on_corpus(cls, corpus: Corpus, cache_dir: Path, split: str | None = None,
                  progress: bool = True) -> RetrievalEvaluator:
        """The captions of ``corpus`` (optionally one split) in the model's languages; the photos' features come
        from the model's extractor through the feature cache in ``cache_dir``."""
        return cls(lambda model: corpus_gallery(model, corpus, cache_dir, split, progress))

    def evaluate(self, model: Any) -> dict:
        g = self.gallery(model)
        image_emb = model.encode_image_features(g.image_feats)
        caption_emb = g.caption_embeddings(model)
        languages = self.languages if self.languages is not None else sorted(set(g.caption_lang))
        metrics = evaluate_by_language(image_emb, caption_emb, g.caption_image, g.caption_lang,
                                       score_fn=self.scores(model), languages=languages,
                                       language_score_fn=lambda lang: self.scores(model, lang))
        return {"languages": metrics, **g.notes}

    def table(self, result: dict) -> str:
        from ..report import markdown_table

        return markdown_table(result["languages"])


def corpus_gallery(model: Any, corpus: Corpus, cache_dir: Path, split: str | None, progress: bool) -> Gallery:
    """The gallery of ``corpus``'s captions (of ``split``) in every language ``model`` serves; a language it cannot
    read is skipped (``notes["skipped_languages"]``), and ``notes["served_as"]`` says how each scored one is served."""
    from ...features.cache import extract_features

    served = {lang: _served_as(model, lang) for lang in sorted({c.lang for c in corpus.captions})}
    caps = [c for c in corpus.captions if (split is None or c.split == split) and served[c.lang]]
    skipped = sorted(lang for lang, how in served.items() if not how)
    if not caps:
        raise DataError(f"{corpus.name}: no captions in split {split!r} in a language the model serves (trained on "
                        f"{', '.join(model.languages)}" + (f"; it cannot read {', '.join(skipped)}" if skipped else "")
                        + ")")
    photo_ids = sorted({c.photo_id for c in caps})
    no_file = [p for p in photo_ids if corpus.photos.get(p) is None or corpus.photos[p].path is None]
    if no_file:
        raise DataError(f"{corpus.name}: {len(no_file)} photos have no image file (e.g. {no_file[0]})")
    result = extract_features([corpus.photos[p].path for p in photo_ids], model.extractor, cache_dir,
                              progress=progress)
    row = {p: i for i, p in enumerate(photo_ids[i] for i in result.index)}
    caps = [c for c in caps if c.photo_id in row]
    trained = [c for c in caps if served[c.lang] == "trained"]
    ids = iter(caption_inputs(model.captions, trained) if trained else [])
    return Gallery(result.features, [next(ids) if served[c.lang] == "trained" else None for c in caps],
                   np.array([row[c.photo_id] for c in caps]), [c.lang for c in caps],
                   {"n_failed_photos": len(result.failures), "failures": [[str(p), r] for p, r in result.failures],
                    "skipped_languages": skipped,
                    "served_as": {lang: how for lang, how in served.items() if how}},
                   caption_text=[None if served[c.lang] == "trained" else c.text for c in caps])


def _served_as(model: Any, lang: str) -> str | None:
    """"trained", "adapted", "zero-shot" or None (:func:`polyvse.languages.serving_status`); a model that does not
    say (no checkpoint: a test double) serves the languages it lists, as trained."""
    from ...languages import serving_status

    if getattr(model, "checkpoint", None) is None:
        return "trained" if lang in model.languages else None
    return serving_status(model, lang)
