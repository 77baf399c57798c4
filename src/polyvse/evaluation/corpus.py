"""Per-language image-sentence retrieval of a model: on embedded features and caption inputs
(:func:`evaluate_embeddings`, the trainer's evaluation of its split) or on a corpus's photos and captions
(:func:`evaluate_corpus`, `polyvse evaluate`)."""
from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..data.types import Corpus
from ..errors import DataError
from ..models.text_input import caption_inputs
from .retrieval import evaluate_by_language

if TYPE_CHECKING:
    from ..api import PolyvseModel


def evaluate_embeddings(model: PolyvseModel, image_feats, caption_ids: list[list[int]],
                        caption_image: np.ndarray, caption_lang: list[str], languages: list[str] | None) -> dict:
    """Per-language metrics of ``model`` on image features and the captions' model inputs (``caption_image``:
    each caption's row of ``image_feats``)."""
    image_emb = model.encode_image_features(image_feats)
    caption_emb = model.encode_ids(caption_ids, list(caption_lang))  # models with per-language parts need it
    # a checkpoint with CSLS banks ranks by CSLS against its language's caption bank (polyvse.similarity.hubness)
    scores = getattr(model, "retrieval_scores", None)
    return evaluate_by_language(image_emb, caption_emb, np.asarray(caption_image), caption_lang,
                                score_fn=model.similarity, languages=languages,
                                language_score_fn=None if scores is None else
                                lambda lang: functools.partial(scores, lang=lang))


def evaluate_corpus(model: PolyvseModel, corpus: Corpus, cache_dir: Path, split: str | None = None,
                    progress: bool = True) -> dict:
    """Per-language retrieval metrics of `model` on the captions of `corpus` (optionally one split)."""
    from ..features.cache import extract_features

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
    ok = [photo_ids[i] for i in result.index]
    row = {p: i for i, p in enumerate(ok)}
    caps = [c for c in caps if c.photo_id in row]
    metrics = evaluate_embeddings(
        model, result.features, caption_inputs(model.captions, caps),
        np.array([row[c.photo_id] for c in caps]), [c.lang for c in caps],
        languages=sorted({c.lang for c in caps}))
    return {"languages": metrics, "n_failed_photos": len(result.failures),
            "failures": [[str(p), r] for p, r in result.failures], "skipped_languages": skipped}
