"""Evaluate a model on a corpus: one path for the trainer's final evaluation and `polyvse evaluate`."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from polyvse.api import PolyvseModel
from polyvse.data.types import Corpus
from polyvse.errors import DataError


def evaluate_embeddings(model: PolyvseModel, image_feats, caption_ids: list[list[int]],
                        caption_image: np.ndarray, caption_lang: list[str], languages: list[str] | None) -> dict:
    from polyvse.evaluation.retrieval import evaluate_by_language

    image_emb = model.encode_image_features(image_feats)
    caption_emb = model.encode_ids(caption_ids, list(caption_lang))  # models with per-language parts need it
    return evaluate_by_language(image_emb, caption_emb, np.asarray(caption_image), caption_lang,
                                score_fn=model.similarity, languages=languages)


def caption_inputs(captions, caps) -> list:
    """Each caption's model input (word ids, or a sentence vector), one ``ids_many`` call per language so
    that a pretrained sentence encoder embeds in batches."""
    out: list = [None] * len(caps)
    by_lang: dict[str, list[int]] = {}
    for i, c in enumerate(caps):
        by_lang.setdefault(c.lang, []).append(i)
    for lang, idx in by_lang.items():
        for i, x in zip(idx, captions.ids_many([caps[i].text for i in idx], lang)):
            out[i] = x
    return out


def evaluate_corpus(model: PolyvseModel, corpus: Corpus, cache_dir: Path, split: str | None = None,
                    progress: bool = True) -> dict:
    """Per-language retrieval metrics of `model` on the captions of `corpus` (optionally one split)."""
    from polyvse.features.cache import extract_features

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
