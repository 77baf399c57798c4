"""Evaluation protocols built on :func:`polyvse.metrics.retrieval_metrics` (the only ranking code).

* :func:`coco_5fold_metrics` / :func:`coco_fold_metrics` -- the COCO "1k test, 5 folds" protocol.
* :func:`evaluate_by_language` -- one gallery per caption language.
* :func:`cross_lingual_retrieval` -- caption <-> caption retrieval between aligned translations.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

import numpy as np
import torch

from ..metrics import METRIC_KEYS, as_caption_image, as_score_matrix, retrieval_metrics

ScoreFn = Callable[[Any, Any], Any]

#: Keys of :func:`cross_lingual_retrieval` results, in order.
CROSS_LINGUAL_KEYS: tuple[str, ...] = (
    "a2b_r1", "a2b_r5", "a2b_r10", "a2b_medr", "a2b_meanr",
    "b2a_r1", "b2a_r5", "b2a_r10", "b2a_medr", "b2a_meanr",
    "rsum", "mr",
)

__all__ = [
    "CROSS_LINGUAL_KEYS",
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


def _take_rows(x: Any, idx: np.ndarray) -> Any:
    """x[idx] for a torch tensor (index moved to its device) or anything numpy-indexable."""
    if isinstance(x, torch.Tensor):
        return x[torch.as_tensor(idx, dtype=torch.long, device=x.device)]
    return np.asarray(x)[idx]


def _as_tensor(x: Any) -> torch.Tensor:
    t = x.detach() if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x))
    return t if t.is_floating_point() else t.float()


def cosine_scores(a: Any, b: Any) -> torch.Tensor:
    """Cosine similarity matrix (len(a), len(b)) of numpy/torch embeddings (the default score_fn)."""
    from ..similarity import CosineSimilarity

    ta, tb = _as_tensor(a), _as_tensor(b)
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
                   torch or numpy; called under ``torch.no_grad()``; may be asymmetric (order embeddings)
    languages:     languages to report, in this order (default: all languages present, sorted); a
                   requested language with no caption is an error
    language_score_fn: language -> the score_fn of that language's gallery, used instead of ``score_fn``
                   (scores that depend on the query language, e.g. CSLS against its caption bank)

    For language L the gallery is the images having at least one caption in L (kept in their original
    order), queried by/against the captions in L only. Returns ``{L: metrics}`` where metrics holds the
    :func:`polyvse.metrics.retrieval_metrics` keys plus ``n_images`` and ``n_captions`` (ints).
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
        with torch.no_grad():
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
    :func:`polyvse.metrics.retrieval_metrics` with ``caption_image = arange(n)`` (a as "images", b as
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
    with torch.no_grad():
        sim = fn(emb_a, emb_b)
    _check_sim_shape(sim, (n_a, n_b), "the aligned caption sets")
    m = retrieval_metrics(sim, np.arange(n_a))
    out = {}
    for key in CROSS_LINGUAL_KEYS:
        src = key.replace("a2b_", "i2t_").replace("b2a_", "t2i_")
        out[key] = m[src]
    return out
