"""Retrieval metrics: the one ranking implementation every evaluation in polyvse goes through.

Conventions (used everywhere in polyvse):

* ``sim[i, j]`` is the score of image ``i`` against caption ``j``; higher means "more similar".
  It need not be symmetric in any sense (order-embedding scores are fine).
* ``caption_image[j]`` is the index (row of ``sim``) of the image that caption ``j`` describes.
  An image may have any number of captions, including none.
* Ranks are 1-based. Ties are broken **pessimistically**: every non-gold item whose score equals the
  gold score is placed ahead of the gold item. A scorer that cannot tell items apart (constant ``sim``)
  therefore gets the worst possible rank, never a good one.

Exact rank definitions
----------------------
text -> image, caption ``j`` with gold image ``g = caption_image[j]``::

    rank_t2i[j] = 1 + #{ images i != g : sim[i, j] >= sim[g, j] }

image -> text, image ``i`` with gold captions ``G_i = {j : caption_image[j] == i}`` (non-empty)::

    best_i      = max_{j in G_i} sim[i, j]
    rank_i2t[i] = 1 + #{ captions j not in G_i : sim[i, j] >= best_i }

i.e. the position of the first gold caption in the list of all captions sorted by descending score,
in the worst case over all ways of ordering tied items (equivalently: non-gold captions tied with the
best gold go before it). Other *gold* captions tied with the best gold do not push it down: whichever
of them comes first is a gold caption at that position, so e.g. two identical gold captions that both
score highest give rank 1, not 2. With no ties this is exactly the usual VSE/VSE++ definition (rank of
the first gold caption in ``argsort(-sim[i])``). Images with no caption are left out of image -> text
(they have nothing to retrieve) but remain in the gallery as distractors for text -> image.

For a constant ``sim`` this gives ``rank_t2i = n_images`` and ``rank_i2t[i] = n_captions - |G_i| + 1``,
the worst rank the first gold can have.

Summary statistics: ``R@K`` = percentage of queries with rank <= K; ``medr`` = the median rank
(``numpy.median``: with an even number of queries it is the mean of the two middle ranks, so it can end
in .5 -- it is not floored as some VSE code does); ``meanr`` = the mean rank; ``rsum`` = the sum of the
six recalls; ``mr`` = their mean (``rsum / 6``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

RECALL_KS: tuple[int, ...] = (1, 5, 10)

#: Keys of the dict returned by :func:`retrieval_metrics`, in order.
METRIC_KEYS: tuple[str, ...] = (
    "i2t_r1",
    "i2t_r5",
    "i2t_r10",
    "i2t_medr",
    "i2t_meanr",
    "t2i_r1",
    "t2i_r5",
    "t2i_r10",
    "t2i_medr",
    "t2i_meanr",
    "rsum",
    "mr",
)

# Elements of sim compared per block; bounds the temporary boolean masks to ~16 MB each.
_BLOCK_ELEMENTS = 1 << 24

__all__ = [
    "METRIC_KEYS",
    "RECALL_KS",
    "RetrievalRanks",
    "as_score_matrix",
    "as_caption_image",
    "metrics_from_ranks",
    "retrieval_metrics",
    "retrieval_ranks",
]


def _to_numpy(x: Any) -> np.ndarray:
    """numpy view/copy of a numpy array, torch tensor (any device, with or without grad) or sequence."""
    torch = sys.modules.get("torch")  # a tensor comes only from a caller that imported torch: never import it here
    if torch is not None and isinstance(x, torch.Tensor):
        x = x.detach()
        if x.is_floating_point() and x.dtype not in (torch.float32, torch.float64):
            x = x.float()  # float16 / bfloat16 -> float32 is exact; numpy has no bfloat16
        return x.cpu().numpy()
    return np.asarray(x)


def as_score_matrix(sim: Any, name: str = "sim") -> np.ndarray:
    """Validate a score matrix and return it as a 2-D real numpy array (no copy when possible).

    Raises ValueError for a wrong number of dimensions, an empty matrix, a non-real dtype or NaN entries.
    """
    arr = _to_numpy(sim)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D (n_images, n_captions) score matrix, got shape {arr.shape}")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"{name} is empty (shape {arr.shape}): need at least one image and one caption")
    if arr.dtype == np.bool_:
        arr = arr.astype(np.int8)
    elif arr.dtype == np.float16:
        arr = arr.astype(np.float32)
    elif not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)):
        raise ValueError(f"{name} must hold real numbers, got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.floating) and np.isnan(arr.min()):  # min propagates NaN; no big temp
        nan = np.isnan(arr)
        if nan.any():
            i, j = np.argwhere(nan)[0]
            raise ValueError(
                f"{name} contains {int(nan.sum())} NaN score(s) (first at [{i}, {j}]); "
                "NaN cannot be ranked -- check the model/embeddings for NaN or division by zero"
            )
    return arr


def as_caption_image(caption_image: Any, n_images: int, n_captions: int) -> np.ndarray:
    """Validate caption -> image indices and return them as a 1-D int64 numpy array."""
    arr = _to_numpy(caption_image)
    if arr.ndim != 1:
        raise ValueError(f"caption_image must be 1-D (one image index per caption), got shape {arr.shape}")
    if arr.shape[0] != n_captions:
        raise ValueError(
            f"caption_image has {arr.shape[0]} entries but the score matrix has {n_captions} captions (columns)"
        )
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"caption_image must hold integer image indices, got dtype {arr.dtype}")
    arr = arr.astype(np.int64, copy=False)
    if arr.size:
        lo, hi = int(arr.min()), int(arr.max())
        if lo < 0 or hi >= n_images:
            bad = lo if lo < 0 else hi
            raise ValueError(
                f"caption_image holds index {bad}, outside [0, {n_images}) for a score matrix with "
                f"{n_images} images (rows)"
            )
    return arr


@dataclass(frozen=True)
class RetrievalRanks:
    """1-based ranks of the gold items (definitions in the module docstring).

    i2t:    (n_queried_images,) rank of the first gold caption, for the images that have captions
    images: (n_queried_images,) the image index (row of sim) each entry of ``i2t`` belongs to, ascending
    t2i:    (n_captions,) rank of the gold image of each caption
    """

    i2t: np.ndarray
    images: np.ndarray
    t2i: np.ndarray


def retrieval_ranks(sim: Any, caption_image: Any) -> RetrievalRanks:
    """Gold ranks in both directions for an (n_images, n_captions) score matrix.

    Vectorised and processed in blocks of rows, so memory stays bounded (a few tens of MB on top of sim)
    and 5k x 25k takes well under a second of comparisons.
    """
    s = as_score_matrix(sim)
    n_images, n_captions = s.shape
    ci = as_caption_image(caption_image, n_images, n_captions)

    cols = np.arange(n_captions)
    gold = s[ci, cols]  # gold[j] = sim[caption_image[j], j]

    n_gold = np.bincount(ci, minlength=n_images)
    has_caption = n_gold > 0
    best = np.zeros(n_images, dtype=s.dtype)
    best[ci] = gold  # any gold value, then raise to the max
    np.maximum.at(best, ci, gold)
    # gold captions tied with their image's best gold score (>= 1 for every image with captions)
    n_best_gold = np.bincount(ci, weights=(gold == best[ci]), minlength=n_images).astype(np.int64)

    row_ge = np.empty(n_images, dtype=np.int64)  # #{j : sim[i, j] >= best[i]}
    col_ge = np.zeros(n_captions, dtype=np.int64)  # #{i : sim[i, j] >= gold[j]}
    step = max(1, _BLOCK_ELEMENTS // n_captions)
    for start in range(0, n_images, step):
        block = s[start : start + step]
        row_ge[start : start + step] = np.count_nonzero(block >= best[start : start + step, None], axis=1)
        col_ge += np.count_nonzero(block >= gold[None, :], axis=0)

    # row_ge counts every gold caption scoring >= best, i.e. exactly those tied with it: drop them, add 1.
    i2t_all = row_ge - n_best_gold + 1
    # col_ge counts the gold image itself (gold >= gold), which plays the role of the "1 +".
    images = np.flatnonzero(has_caption)
    return RetrievalRanks(i2t=i2t_all[images], images=images, t2i=col_ge)


def _summary(ranks: np.ndarray, prefix: str) -> dict[str, float]:
    out = {f"{prefix}_r{k}": float(100.0 * np.count_nonzero(ranks <= k) / ranks.size) for k in RECALL_KS}
    out[f"{prefix}_medr"] = float(np.median(ranks))
    out[f"{prefix}_meanr"] = float(np.mean(ranks))
    return out


def metrics_from_ranks(i2t_ranks: Any, t2i_ranks: Any) -> dict[str, float]:
    """The :data:`METRIC_KEYS` dict from 1-based gold ranks of both directions (plain Python floats)."""
    i2t = np.asarray(i2t_ranks)
    t2i = np.asarray(t2i_ranks)
    if i2t.size == 0 or t2i.size == 0:
        raise ValueError("need at least one image->text and one text->image rank")
    out = {**_summary(i2t, "i2t"), **_summary(t2i, "t2i")}
    recalls = [out[f"{d}_r{k}"] for d in ("i2t", "t2i") for k in RECALL_KS]
    out["rsum"] = float(sum(recalls))
    out["mr"] = float(out["rsum"] / len(recalls))
    return {k: out[k] for k in METRIC_KEYS}


def retrieval_metrics(sim: Any, caption_image: Any) -> dict[str, float]:
    """Image<->text retrieval metrics for one gallery.

    sim:           (n_images, n_captions) scores, numpy array or torch tensor (any device); no NaN.
    caption_image: (n_captions,) integer index of each caption's image (list, numpy or torch).

    Returns ``{i2t_r1, i2t_r5, i2t_r10, i2t_medr, i2t_meanr, t2i_r1, t2i_r5, t2i_r10, t2i_medr, t2i_meanr,
    rsum, mr}`` as plain floats; recalls in percent, ranks 1-based, pessimistic ties. See the module
    docstring for the exact rank definitions (image->text uses each image's best-ranked gold caption;
    images without captions are skipped for image->text but stay as text->image distractors).
    """
    r = retrieval_ranks(sim, caption_image)
    return metrics_from_ranks(r.i2t, r.t2i)
