"""Word-translation evaluation of an alignment: MUSE precision@1 and AME's "alignment ratio".

Both take embeddings that are ALREADY in one space (map the source side first, e.g. ``src @ W``) and a
lexicon of index pairs ``(source row, target row)``, e.g. the first output of
:func:`polyvse.alignment.lexicon.filter_lexicon`. A source word with several gold translations is one query;
it counts as correct when the retrieved target is ANY of its translations (as MUSE's
``get_word_translation_accuracy`` does). Retrieval runs over all rows of ``tgt_emb``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Literal

import torch

from ..csls.vocabulary import csls_retrieve, nn_retrieve

__all__ = ["word_translation_p_at_1", "alignment_ratio", "group_lexicon"]


def group_lexicon(pairs: torch.Tensor | Iterable[tuple[int, int]]) -> dict[int, set[int]]:
    """``{source row: set of gold target rows}`` from ``(n, 2)`` index pairs (source order kept)."""
    t = torch.as_tensor(pairs if isinstance(pairs, torch.Tensor) else list(pairs), dtype=torch.long)
    if t.numel() == 0:
        return {}
    if t.dim() != 2 or t.shape[1] != 2:
        raise ValueError(f"pairs must have shape (n, 2), got {tuple(t.shape)}")
    gold: dict[int, set[int]] = defaultdict(set)
    for s, g in t.tolist():
        gold[s].add(g)
    return dict(gold)


def word_translation_p_at_1(
    src_emb: torch.Tensor,
    tgt_emb: torch.Tensor,
    pairs: torch.Tensor | Iterable[tuple[int, int]],
    method: Literal["csls", "nn"] = "csls",
    k: int = 10,
    *,
    num_source_words: int | None = None,
    chunk_size: int = 4096,
) -> float:
    """Word-translation precision@1 in PERCENT (0-100).

    method: "csls" (CSLS with ``k`` neighbours, Conneau et al. 2018; MUSE's ``csls_knn_10`` for k=10) or
        "nn" (cosine nearest neighbour). CSLS neighbourhoods use all rows of ``src_emb`` / ``tgt_emb``.
    num_source_words: denominator override. By default it is the number of distinct source words in
        ``pairs``. fastText's evaluation (and AME's code) divide by the number of distinct source words of
        the dictionary FILE, so that words missing from the vocabulary count as errors; pass that number
        here to reproduce it. It must be >= the number of distinct sources in ``pairs``.
    """
    gold = group_lexicon(pairs)
    if not gold:
        raise ValueError("the lexicon is empty: no (source, target) pair to evaluate")
    denom = len(gold) if num_source_words is None else int(num_source_words)
    if denom < len(gold):
        raise ValueError(f"num_source_words={denom} is smaller than the {len(gold)} distinct source words in pairs")
    n_src, n_tgt = src_emb.shape[0], tgt_emb.shape[0]
    for s, gs in gold.items():
        if not 0 <= s < n_src or any(not 0 <= t < n_tgt for t in gs):
            raise IndexError(
                f"lexicon pair ({s}, {sorted(gs)}) outside the embedding tables "
                f"({n_src} source rows, {n_tgt} target rows)"
            )
    queries = torch.tensor(list(gold), dtype=torch.long)
    if method == "csls":
        idx, _ = csls_retrieve(src_emb, tgt_emb, k=k, topk=1, queries=queries, chunk_size=chunk_size)
    elif method == "nn":
        idx, _ = nn_retrieve(src_emb, tgt_emb, topk=1, queries=queries, chunk_size=chunk_size)
    else:
        raise ValueError(f"method must be 'csls' or 'nn', got {method!r}")
    correct = sum(1 for s, pred in zip(gold, idx[:, 0].tolist()) if pred in gold[s])
    return 100.0 * correct / denom


def alignment_ratio(
    src_emb: torch.Tensor,
    tgt_emb: torch.Tensor,
    pairs: torch.Tensor | Iterable[tuple[int, int]],
    *,
    num_source_words: int | None = None,
    chunk_size: int = 4096,
) -> float:
    """AME's alignment ratio (Mohammadshahi et al. 2019, "Aligning multilingual word embeddings for
    cross-modal retrieval task", Sec. 4.1 and 4.4; the "Alignment" column of Tables 1-4), in PERCENT.

    The paper defines it only in words: "For the metric of alignment, we use bilingual lexicons of [MUSE]
    ... We extract the training words of descriptions in two languages. For training, we combine 'full'
    and 'test' sections of MUSE, then filter them to the training words. For evaluation, we filter 'train'
    section of MUSE to the training words." (Sec. 4.1), and "the alignment ratio for AME is 6.80% lower
    than FME which means the translators can almost keep languages aligned" (Sec. 4.4). The formula is
    the one of the authors' code (AME-CMR ``model.py``: ``METRIC_SIMIL`` -> ``compute_nn_accuracy``, taken
    from fastText's alignment utilities)::

        alignment ratio = 100 * |{ s in S : argmax_{t in V_tgt} cos(x_s, y_t) in G(s) }| / |S|

    S = distinct source words of the evaluation lexicon (MUSE "train" = ``0-5000`` split filtered to the
    caption vocabularies), G(s) = gold translations of s, V_tgt = the whole target caption vocabulary,
    x / y = the CURRENT (fine-tuned, translator-mapped) word embeddings. That is word-translation P@1 with
    plain cosine nearest neighbour, not CSLS: ``word_translation_p_at_1(..., method="nn")``.
    In AME's code |S| is the number of distinct source words in the lexicon file (``num_source_words``),
    which equals the default here when the file was already filtered to the vocabularies, as AME does.

    AME computes it for each direction (en->de and de->en lexicons); the paper prints one number per model
    without saying which direction (or mean) it is. AME's code maps each language by its own translator
    before the comparison (English rows by R_en->de, German rows by R_de->en); that is the caller's job.
    Note: under the AME protocol the training lexicon (full + test) contains the evaluation pairs (the
    "train" split is a subset of "full"), so it measures how well the seed alignment is KEPT during
    retrieval training, not generalisation to unseen words. polyvse's AME (``polyvse_train.objectives``)
    therefore trains on the train part of :func:`polyvse.alignment.muse_lexicon` and reports this ratio on
    its test part.
    """
    return word_translation_p_at_1(
        src_emb, tgt_emb, pairs, method="nn", num_source_words=num_source_words, chunk_size=chunk_size
    )
