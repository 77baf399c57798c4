"""Evaluation protocols built on :func:`polyvse.evaluation.ranking.retrieval_metrics` (the only ranking code).

* :func:`coco_5fold_metrics` / :func:`coco_fold_metrics` -- the COCO "1k test, 5 folds" protocol.
* :func:`evaluate_by_language` -- one gallery per caption language.
* :func:`cross_lingual_retrieval` -- caption <-> caption retrieval between aligned translations.
* :class:`RetrievalEvaluator` -- image-sentence retrieval per caption language, one gallery per language (the
  photos with a caption in it), ranked as search ranks (CSLS against the checkpoint's banks where it carries them).
  On your own photos and captions (:meth:`RetrievalEvaluator.on_corpus`) every language the model serves is scored
  -- trained, adapted or zero-shot (:func:`polyvse.languages.serving_status`) -- each caption embedded as a query
  in its language is (``model.encode_text``: an adapted language's subword student, a zero-shot language's
  fallback part).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..data.types import Corpus
from ..errors import DataError
from ..modules.text_input import caption_inputs
from .base import Evaluator, ScoreFn
from .ranking import METRIC_KEYS, as_caption_image, as_score_matrix, retrieval_metrics

#: Keys of :func:`cross_lingual_retrieval` results, in order.
CROSS_LINGUAL_KEYS: tuple[str, ...] = (
    "a2b_r1",
    "a2b_r5",
    "a2b_r10",
    "a2b_medr",
    "a2b_meanr",
    "b2a_r1",
    "b2a_r5",
    "b2a_r10",
    "b2a_medr",
    "b2a_meanr",
    "rsum",
    "mr",
)

__all__ = [
    "CROSS_LINGUAL_KEYS",
    "Gallery",
    "RetrievalEvaluator",
    "coco_5fold_metrics",
    "coco_fold_metrics",
    "cosine_scores",
    "cross_lingual_retrieval",
    "evaluate_by_language",
]


# --------------------------------------------------------------------------------------------- folds


def coco_fold_metrics(sim: Any, caption_image: Any, n_folds: int = 5) -> list[dict[str, float]]:
    """Per-fold metrics of the COCO protocol (see :func:`coco_5fold_metrics`), one dict per fold."""
    if isinstance(n_folds, bool) or not isinstance(n_folds, (int, np.integer)) or n_folds < 1:
        raise ValueError(f"n_folds must be a positive integer, got {n_folds!r}")
    s = as_score_matrix(sim)
    n_images, n_captions = s.shape
    ci = as_caption_image(caption_image, n_images, n_captions)
    if n_images % n_folds:
        raise ValueError(
            f"{n_images} images cannot be split into {n_folds} equal folds; "
            f"the COCO protocol needs n_images divisible by n_folds (e.g. 5000 images, 5 folds of 1000)"
        )
    size = n_images // n_folds
    folds = []
    for f in range(n_folds):
        lo, hi = f * size, (f + 1) * size
        caps = np.flatnonzero((ci >= lo) & (ci < hi))
        if caps.size == 0:
            raise ValueError(f"fold {f} (images {lo}..{hi - 1}) has no captions")
        folds.append(retrieval_metrics(s[lo:hi][:, caps], ci[caps] - lo))
    return folds


def coco_5fold_metrics(sim: Any, caption_image: Any, n_folds: int = 5) -> dict[str, float]:
    """COCO-style n-fold evaluation (the usual "COCO 1k" numbers for a 5k test set).

    The images (rows of ``sim``) are split into ``n_folds`` consecutive blocks of equal size
    (n_images must be divisible by n_folds); each caption goes to its image's fold; each fold is an
    independent gallery scored with :func:`retrieval_metrics`; every metric (recalls, medr, meanr,
    rsum, mr) is the plain mean over folds. Per-fold dicts: :func:`coco_fold_metrics`.
    """
    folds = coco_fold_metrics(sim, caption_image, n_folds)
    return {k: float(np.mean([f[k] for f in folds])) for k in METRIC_KEYS}


# ------------------------------------------------------------------------------------------ helpers


def _n_rows(x: Any, name: str) -> int:
    shape = tuple(x.shape) if hasattr(x, "shape") else np.shape(x)
    if len(shape) != 2:
        raise ValueError(f"{name} must be a 2-D (n, dim) embedding matrix, got shape {shape}")
    return int(shape[0])


def _torch():
    """torch where it is already imported, else None: a torch tensor can only come from a caller that imported it,
    so numpy inputs are scored without importing torch (the light install has none)."""
    return sys.modules.get("torch")


def _is_tensor(x: Any) -> bool:
    torch = _torch()
    return torch is not None and isinstance(x, torch.Tensor)


def _no_grad():
    """torch.no_grad() where torch is loaded (a score_fn may build graphs), else nothing to switch off."""
    torch = _torch()
    return torch.no_grad() if torch is not None else contextlib.nullcontext()


def _take_rows(x: Any, idx: np.ndarray) -> Any:
    """x[idx] for a torch tensor (index moved to its device) or anything numpy-indexable."""
    if _is_tensor(x):
        torch = _torch()
        return x[torch.as_tensor(idx, dtype=torch.long, device=x.device)]
    return np.asarray(x)[idx]


def _float_array(x: Any) -> np.ndarray:
    a = np.asarray(x)
    return a if np.issubdtype(a.dtype, np.floating) else a.astype(np.float32)


def cosine_scores(a: Any, b: Any) -> Any:
    """Cosine similarity matrix (len(a), len(b)) of numpy/torch embeddings (the default score_fn): a torch tensor
    when either input is one (``polyvse.similarity.CosineSimilarity``), else a numpy array of the same arithmetic
    (rows divided by max(norm, 1e-12), in the inputs' promoted dtype)."""
    if _is_tensor(a) or _is_tensor(b):
        return _torch_cosine_scores(a, b)
    na, nb = _float_array(a), _float_array(b)
    dtype = np.promote_types(na.dtype, nb.dtype)

    def unit(x: np.ndarray) -> np.ndarray:
        x = x.astype(dtype, copy=False)
        return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), dtype.type(1e-12))

    return unit(na) @ unit(nb).T


def _torch_cosine_scores(a: Any, b: Any):
    import torch

    from ..similarity import CosineSimilarity

    def tensor(x: Any) -> torch.Tensor:
        t = x.detach() if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x))
        return t if t.is_floating_point() else t.float()

    ta, tb = tensor(a), tensor(b)
    dtype = torch.promote_types(ta.dtype, tb.dtype)
    with torch.no_grad():
        return CosineSimilarity()(ta.to(dtype), tb.to(dtype))


def _check_sim_shape(sim: Any, expected: tuple[int, int], what: str) -> None:
    shape = tuple(sim.shape) if hasattr(sim, "shape") else np.shape(sim)
    if tuple(shape) != expected:
        raise ValueError(f"score_fn returned shape {tuple(shape)} for {what}; expected {expected}")


# ------------------------------------------------------------------------------------- per language


def evaluate_by_language(
    image_emb: Any,
    caption_emb: Any,
    caption_image: Any,
    caption_lang: Sequence[str],
    score_fn: ScoreFn,
    languages: Iterable[str] | None = None,
    language_score_fn: Callable[[str], ScoreFn] | None = None,
) -> dict[str, dict[str, float]]:
    """Image<->text retrieval evaluated separately for each caption language.

    image_emb:     (n_images, d_img) numpy array or torch tensor
    caption_emb:   (n_captions, d_txt) numpy array or torch tensor
    caption_image: (n_captions,) index into image_emb of each caption's image
    caption_lang:  (n_captions,) language code of each caption
    score_fn:      score_fn(image_emb_subset, caption_emb_subset) -> (n_img_subset, n_cap_subset) scores,
                   torch or numpy; called under ``torch.no_grad()`` where torch is loaded; may be asymmetric
                   (order embeddings)
    languages:     languages to report, in this order (default: all languages present, sorted); a
                   requested language with no caption is an error
    language_score_fn: language -> the score_fn of that language's gallery, used instead of ``score_fn``
                   (scores that depend on the query language, e.g. CSLS against its caption bank)

    For language L the gallery is the images having at least one caption in L (kept in their original
    order), queried by/against the captions in L only. Returns ``{L: metrics}`` where metrics holds the
    :func:`polyvse.evaluation.ranking.retrieval_metrics` keys plus ``n_images`` and ``n_captions`` (ints).
    """
    n_images = _n_rows(image_emb, "image_emb")
    n_captions = _n_rows(caption_emb, "caption_emb")
    if n_images == 0 or n_captions == 0:
        raise ValueError(f"need at least one image and one caption, got {n_images} and {n_captions}")
    ci = as_caption_image(caption_image, n_images, n_captions)
    lang = [str(x) if isinstance(x, str) else x for x in caption_lang]  # np.str_ -> str
    if len(lang) != n_captions:
        raise ValueError(f"caption_lang has {len(lang)} entries but caption_emb has {n_captions} rows")
    bad = next((x for x in lang if not isinstance(x, str)), None)
    if bad is not None:
        raise ValueError(f"caption_lang must hold language codes (str), found {bad!r}")
    lang_arr = np.array(lang, dtype=object)
    present = sorted(set(lang))
    if languages is None:
        wanted = present
    elif isinstance(languages, str):
        wanted = [languages]
    else:
        wanted = [str(x) if isinstance(x, str) else x for x in languages]
    missing = [x for x in wanted if x not in present]
    if missing:
        raise ValueError(f"no captions in language(s) {missing}; languages present: {present}")
    if len(set(wanted)) != len(wanted):
        raise ValueError(f"languages lists a language twice: {wanted}")

    results: dict[str, dict[str, float]] = {}
    for code in wanted:
        caps = np.flatnonzero(lang_arr == code)
        imgs = np.unique(ci[caps])  # sorted: original image order
        local = np.searchsorted(imgs, ci[caps])
        with _no_grad():
            fn = score_fn if language_score_fn is None else language_score_fn(code)
            sim = fn(_take_rows(image_emb, imgs), _take_rows(caption_emb, caps))
        _check_sim_shape(sim, (imgs.size, caps.size), f"language {code!r} ({imgs.size} images, {caps.size} captions)")
        metrics: dict[str, Any] = retrieval_metrics(sim, local)
        metrics["n_images"] = int(imgs.size)
        metrics["n_captions"] = int(caps.size)
        results[code] = metrics
    return results


# ------------------------------------------------------------------------------------ cross-lingual


def cross_lingual_retrieval(emb_a: Any, emb_b: Any, score_fn: ScoreFn | None = None) -> dict[str, float]:
    """Retrieval between aligned caption sets: row i of ``emb_a`` translates row i of ``emb_b``.

    score_fn(emb_a, emb_b) -> (n, n) scores, default :func:`cosine_scores`. Uses
    :func:`polyvse.evaluation.ranking.retrieval_metrics` with ``caption_image = arange(n)`` (a as "images", b as
    "captions"), so ranks and ties follow exactly the same definitions: ``a2b_*`` ranks all b rows for
    each a row (image->text), ``b2a_*`` ranks all a rows for each b row (text->image).

    Returns ``{a2b_r1, a2b_r5, a2b_r10, a2b_medr, a2b_meanr, b2a_r1, ..., b2a_meanr, rsum, mr}`` (floats).
    """
    n_a, n_b = _n_rows(emb_a, "emb_a"), _n_rows(emb_b, "emb_b")
    if n_a != n_b:
        raise ValueError(f"emb_a and emb_b must be aligned row by row, got {n_a} and {n_b} rows")
    if n_a == 0:
        raise ValueError("emb_a and emb_b are empty")
    fn = cosine_scores if score_fn is None else score_fn
    with _no_grad():
        sim = fn(emb_a, emb_b)
    _check_sim_shape(sim, (n_a, n_b), "the aligned caption sets")
    m = retrieval_metrics(sim, np.arange(n_a))
    out = {}
    for key in CROSS_LINGUAL_KEYS:
        src = key.replace("a2b_", "i2t_").replace("b2a_", "t2i_")
        out[key] = m[src]
    return out


@dataclass
class Gallery:
    """Image features, each caption's model input, its row of the features and its language (``notes``: what
    building it left out, reported beside the metrics). ``caption_text``: where given, the captions embedded as
    search embeds a query in their language (None at a row whose ids are in ``caption_ids``: a trained language's,
    for a model that reads ids). ``image_emb``: the photos already in the joint space (then ``image_feats`` is
    None), as the ONNX image encoder gives them (polyvse.evaluation.photos)."""

    image_feats: Any
    caption_ids: list
    caption_image: np.ndarray
    caption_lang: list[str]
    notes: dict = field(default_factory=dict)
    caption_text: list | None = None
    image_emb: np.ndarray | None = None

    def image_embeddings(self, model: Any) -> np.ndarray:
        return self.image_emb if self.image_emb is not None else model.encode_image_features(self.image_feats)

    def caption_embeddings(self, model: Any) -> np.ndarray:
        """Every caption's embedding, in order: trained languages through their ids, the others through
        ``model.encode_text`` by language."""
        if self.caption_text is None:
            return model.encode_ids(self.caption_ids, self.caption_lang)  # models with per-language parts need it
        by_ids = [i for i, t in enumerate(self.caption_text) if t is None]
        parts: list[tuple[list[int], np.ndarray]] = []
        if by_ids:
            parts.append(
                (
                    by_ids,
                    model.encode_ids([self.caption_ids[i] for i in by_ids], [self.caption_lang[i] for i in by_ids]),
                )
            )
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
    def on_features(
        cls,
        image_feats,
        caption_ids: list[list[int]],
        caption_image: np.ndarray,
        caption_lang: list[str],
        languages: list[str] | None,
    ) -> RetrievalEvaluator:
        gallery = Gallery(image_feats, caption_ids, np.asarray(caption_image), list(caption_lang))
        return cls(lambda model: gallery, languages)

    @classmethod
    def on_corpus(
        cls, corpus: Corpus, cache_dir: Path, split: str | None = None, progress: bool = True
    ) -> RetrievalEvaluator:
        """The captions of ``corpus`` (optionally one split) in the model's languages; the photos' features come
        from the model's extractor through the feature cache in ``cache_dir`` (a numpy model's: from its ONNX image
        encoder, :mod:`.photos`)."""
        return cls(lambda model: corpus_gallery(model, corpus, cache_dir, split, progress))

    def evaluate(self, model: Any) -> dict:
        g = self.gallery(model)
        image_emb = g.image_embeddings(model)
        caption_emb = g.caption_embeddings(model)
        languages = self.languages if self.languages is not None else sorted(set(g.caption_lang))
        metrics = evaluate_by_language(
            image_emb,
            caption_emb,
            g.caption_image,
            g.caption_lang,
            score_fn=self.scores(model),
            languages=languages,
            language_score_fn=lambda lang: self.scores(model, lang),
        )
        return {"languages": metrics, **g.notes}

    def table(self, result: dict) -> str:
        from .report import markdown_table

        return markdown_table(result["languages"])


def corpus_gallery(model: Any, corpus: Corpus, cache_dir: Path, split: str | None, progress: bool) -> Gallery:
    """The gallery of ``corpus``'s captions (of ``split``) in every language ``model`` serves; a language it cannot
    read is skipped (``notes["skipped_languages"]``), and ``notes["served_as"]`` says how each scored one is served.
    A model that reads no word ids (the numpy text models) embeds every caption by its text, as it embeds a query."""
    from .photos import embed_photos

    served = {lang: _served_as(model, lang) for lang in sorted({c.lang for c in corpus.captions})}
    caps = [c for c in corpus.captions if (split is None or c.split == split) and served[c.lang]]
    skipped = sorted(lang for lang, how in served.items() if not how)
    if not caps:
        raise DataError(
            f"{corpus.name}: no captions in split {split!r} in a language the model serves (trained on "
            f"{', '.join(model.languages)}" + (f"; it cannot read {', '.join(skipped)}" if skipped else "") + ")"
        )
    photo_ids = sorted({c.photo_id for c in caps})
    no_file = [p for p in photo_ids if corpus.photos.get(p) is None or corpus.photos[p].path is None]
    if no_file:
        raise DataError(f"{corpus.name}: {len(no_file)} photos have no image file (e.g. {no_file[0]})")
    photos = embed_photos(model, [corpus.photos[p].path for p in photo_ids], cache_dir, progress=progress)
    row = {p: i for i, p in enumerate(photo_ids[i] for i in photos.index)}
    caps = [c for c in caps if c.photo_id in row]
    by_ids = {c.lang for c in caps if served[c.lang] == "trained"} if hasattr(model, "encode_ids") else set()
    trained = [c for c in caps if c.lang in by_ids]
    ids = iter(caption_inputs(model.captions, trained) if trained else [])
    return Gallery(
        None,
        [next(ids) if c.lang in by_ids else None for c in caps],
        np.array([row[c.photo_id] for c in caps]),
        [c.lang for c in caps],
        {
            "n_failed_photos": len(photos.failures),
            "failures": [[str(p), r] for p, r in photos.failures],
            "skipped_languages": skipped,
            "served_as": {lang: how for lang, how in served.items() if how},
        },
        caption_text=[None if c.lang in by_ids else c.text for c in caps],
        image_emb=photos.embeddings,
    )


def _served_as(model: Any, lang: str) -> str | None:
    """ "trained", "adapted", "zero-shot" or None (:func:`polyvse.languages.serving_status`); a model that does not
    say (no checkpoint: a test double) serves the languages it lists, as trained."""
    from ..languages import serving_status

    if getattr(model, "checkpoint", None) is None:
        return "trained" if lang in model.languages else None
    return serving_status(model, lang)
