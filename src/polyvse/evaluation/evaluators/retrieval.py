"""Image-sentence retrieval per caption language: one gallery per language (the photos with a caption in it),
ranked as search ranks (CSLS against the checkpoint's banks where it carries them)."""
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
    building it left out, reported beside the metrics)."""

    image_feats: Any
    caption_ids: list
    caption_image: np.ndarray
    caption_lang: list[str]
    notes: dict = field(default_factory=dict)


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
        caption_emb = model.encode_ids(g.caption_ids, g.caption_lang)  # models with per-language parts need it
        languages = self.languages if self.languages is not None else sorted(set(g.caption_lang))
        metrics = evaluate_by_language(image_emb, caption_emb, g.caption_image, g.caption_lang,
                                       score_fn=self.scores(model), languages=languages,
                                       language_score_fn=lambda lang: self.scores(model, lang))
        return {"languages": metrics, **g.notes}

    def table(self, result: dict) -> str:
        from ..report import markdown_table

        return markdown_table(result["languages"])


def corpus_gallery(model: Any, corpus: Corpus, cache_dir: Path, split: str | None, progress: bool) -> Gallery:
    from ...features.cache import extract_features

    caps = [c for c in corpus.captions if (split is None or c.split == split) and c.lang in model.languages]
    skipped = sorted({c.lang for c in corpus.captions} - set(model.languages))
    if not caps:
        raise DataError(f"{corpus.name}: no captions in split {split!r} in the model's languages "
                        f"({', '.join(model.languages)})")
    photo_ids = sorted({c.photo_id for c in caps})
    no_file = [p for p in photo_ids if corpus.photos.get(p) is None or corpus.photos[p].path is None]
    if no_file:
        raise DataError(f"{corpus.name}: {len(no_file)} photos have no image file (e.g. {no_file[0]})")
    result = extract_features([corpus.photos[p].path for p in photo_ids], model.extractor, cache_dir,
                              progress=progress)
    row = {p: i for i, p in enumerate(photo_ids[i] for i in result.index)}
    caps = [c for c in caps if c.photo_id in row]
    return Gallery(result.features, caption_inputs(model.captions, caps), np.array([row[c.photo_id] for c in caps]),
                   [c.lang for c in caps],
                   {"n_failed_photos": len(result.failures), "failures": [[str(p), r] for p, r in result.failures],
                    "skipped_languages": skipped})
