"""Re-ranking translation n-best lists with the photo (Calixto & Liu 2017, "re-ranking n-best lists").

A translation system gives, for source caption i, a list of hypotheses with a translation score; the
photo of caption i is at hand. Re-ranking picks, per list, the hypothesis that maximises

    combined = (1 - w) * z(mt_score) + w * z(sim)

where ``mt_score`` is the hypothesis' total score from the n-best file, ``sim`` is the model's score
between the photo and the hypothesis (its own similarity: cosine, or the order-embedding score), and
``z`` standardises a quantity within one list (subtract the list mean, divide by the list standard
deviation; a constant quantity -- e.g. a list of one -- becomes 0). ``w`` in [0, 1] is the weight of the
image. This is a log-linear interpolation of two features after per-list normalisation: the translation
score (already a log-linear model score, in log-probability units that grow with sentence length) and the
image-hypothesis similarity (a cosine in [-1, 1]) live on unrelated scales, and standardising each within
the list makes ``w`` mean the same thing for every sentence. The slides of Calixto & Liu at hand give the
n-best results but not the combination formula; this choice is ours. ``w`` is a free parameter: tune it on
held-out lists, not on the test references.

Ties are broken by the translation score, then by position in the list, so ``w = 0`` reproduces the
baseline exactly: the hypothesis with the highest total score, the first one on ties (Moses writes lists
best first, so this is its 1-best).

Scores: BLEU and TER from sacrebleu, on the text as given: BLEU's default 13a tokenisation (sacrebleu's
zh tokeniser for Chinese, characters for Japanese unless ``tokenize`` names another; TER with Asian support
for both); hypotheses and references must be in
the same form (sacrebleu expects detokenised text; use ``tokenize="none"`` for pre-tokenised text).

Moses n-best format, one hypothesis per line::

    <sentence id> ||| <hypothesis> ||| <feature scores> ||| <total score> [||| <alignment> ...]

Sentence ids start at 0 and appear in non-decreasing order without gaps (every sentence has at least
one hypothesis); feature scores are ``name= v v ... name= v`` (labels ending in ``=`` or ``:``);
fields after the fourth are ignored. Anything else raises :class:`DataError` naming file:line.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DataError
from ..languages import CJK_LANGUAGES, check_language

__all__ = [
    "Hypothesis",
    "RerankResult",
    "combine_scores",
    "oracle_choice",
    "read_images_list",
    "read_nbest",
    "read_references",
    "rerank",
    "translation_scores",
    "zscore",
]


@dataclass(frozen=True)
class Hypothesis:
    sent_id: int
    text: str
    features: tuple[tuple[str, tuple[float, ...]], ...]  # ((label, values), ...) in file order
    score: float  # the total (model) score
    line: int  # 1-based line in the n-best file (0 when built in memory)


# ------------------------------------------------------------------------------------------- reading


def _parse_float(text: str, what: str, path, line: int) -> float:
    try:
        value = float(text)
    except ValueError:
        raise DataError(f"{what} {text[:30]!r} is not a number", path, line) from None
    if not math.isfinite(value):
        raise DataError(f"{what} is {value}; scores must be finite", path, line)
    return value


def _parse_features(text: str, path, line: int) -> tuple[tuple[str, tuple[float, ...]], ...]:
    out: list[tuple[str, list[float]]] = []
    for tok in text.split():
        if tok.endswith("=") or tok.endswith(":"):
            out.append((tok[:-1], []))
            continue
        value = _parse_float(tok, "feature score", path, line)
        if not out:
            out.append(("", []))
        out[-1][1].append(value)
    return tuple((name, tuple(vals)) for name, vals in out)


def read_nbest(path: str | os.PathLike, n_sentences: int | None = None) -> list[list[Hypothesis]]:
    """Moses n-best file -> ``lists[i]`` = hypotheses of sentence i, in file order.

    Raises DataError (with file:line) for a line without the four ``|||`` fields, a non-integer or
    out-of-order sentence id, a sentence with no hypothesis, non-numeric scores, an empty file, or
    (when ``n_sentences`` is given) a different number of sentences.
    """
    from ..data._io import read_lines

    path = Path(path)
    lines = read_lines(path)
    lists: list[list[Hypothesis]] = []
    for i, raw in enumerate(lines, 1):
        if not raw.strip():
            raise DataError("empty line; every line must be `id ||| hypothesis ||| features ||| score`", path, i)
        fields = raw.split("|||")
        if len(fields) < 4:
            raise DataError(
                f"expected `id ||| hypothesis ||| feature scores ||| total score`, found "
                f"{len(fields)} field(s) in {raw[:80]!r}",
                path,
                i,
            )
        sid_text = fields[0].strip()
        if not sid_text.isdigit():
            raise DataError(f"sentence id {sid_text[:30]!r} is not a non-negative integer", path, i)
        sid = int(sid_text)
        expected = len(lists)  # the id of a new sentence
        if lists and sid == expected - 1:
            pass
        elif sid == expected:
            lists.append([])
        elif sid < expected:
            raise DataError(
                f"sentence id {sid} after id {expected - 1}: the hypotheses of a sentence must be "
                "consecutive and sentences in ascending order",
                path,
                i,
            )
        elif not lists:
            raise DataError(
                f"the first sentence id is {sid}; ids must start at 0 (sentence 0 has no hypothesis)", path, i
            )
        else:
            missing = f"{expected}" if sid == expected + 1 else f"{expected}..{sid - 1}"
            raise DataError(
                f"sentence id {sid} follows id {expected - 1}: sentence(s) {missing} have no "
                "hypothesis (ids must start at 0 and have no gaps)",
                path,
                i,
            )
        text = fields[1].strip()
        feats = _parse_features(fields[2], path, i)
        score = _parse_float(fields[3].strip(), "total score", path, i)
        lists[-1].append(Hypothesis(sid, text, feats, score, i))
    if not lists:
        raise DataError("no hypotheses in the n-best file", path)
    if n_sentences is not None and len(lists) != n_sentences:
        raise DataError(
            f"the n-best file has {len(lists)} sentences but {n_sentences} were expected "
            "(one per line of the images list / references)",
            path,
        )
    return lists


def read_references(path: str | os.PathLike, n_sentences: int | None = None) -> list[str]:
    """One reference translation per line; the count must be ``n_sentences`` when given."""
    from ..data._io import read_lines

    refs = [line.strip() for line in read_lines(path)]
    if not refs:
        raise DataError("the references file is empty", path)
    if n_sentences is not None and len(refs) != n_sentences:
        raise DataError(f"{len(refs)} reference lines but the n-best file has {n_sentences} sentences", path)
    return refs


def read_images_list(
    path: str | os.PathLike, n_sentences: int | None = None, base: str | os.PathLike | None = None
) -> list[Path]:
    """Photo paths, one per line (line i = photo of sentence i). Relative paths are resolved against
    ``base`` (default: the folder of the list file). Every photo must exist."""
    from ..data._io import read_lines

    path = Path(path)
    base_dir = Path(base) if base is not None else path.parent
    out: list[Path] = []
    for i, raw in enumerate(read_lines(path), 1):
        name = raw.strip()
        if not name:
            raise DataError("empty line in the images list (line i must be the photo of sentence i-1)", path, i)
        p = Path(name).expanduser()
        p = p if p.is_absolute() else base_dir / p
        if not p.is_file():
            raise DataError(f"photo {str(p)!r} not found", path, i)
        out.append(p)
    if not out:
        raise DataError("the images list is empty", path)
    if n_sentences is not None and len(out) != n_sentences:
        raise DataError(f"{len(out)} photos listed but the n-best file has {n_sentences} sentences", path)
    return out


# ------------------------------------------------------------------------------------------ scoring


def zscore(x: Any) -> np.ndarray:
    """(x - mean) / std within one list (population std); all zeros when x is constant."""
    x = np.asarray(x, dtype=np.float64)
    if x.size == 0:
        return x
    d = x - x.mean()
    std = float(np.sqrt(np.mean(d * d)))
    if std == 0.0 or not np.any(d):
        return np.zeros_like(x)
    return d / std


def combine_scores(mt: Any, sim: Any, weight: float) -> np.ndarray:
    """``(1 - weight) * z(mt) + weight * z(sim)`` for one list."""
    return (1.0 - weight) * zscore(mt) + weight * zscore(sim)


def _best(combined: np.ndarray, mt: np.ndarray) -> int:
    """Index of the max combined score; ties -> higher mt score -> earlier position."""
    idx = np.arange(combined.size)
    return int(np.lexsort((-idx, mt, combined))[-1])


@dataclass
class RerankResult:
    """Per sentence i: ``baseline[i]`` / ``chosen[i]`` index into the n-best list, their texts, and the
    per-hypothesis arrays that decided (translation score, image similarity, combined score)."""

    weight: float
    lang: str
    baseline: list[int]
    chosen: list[int]
    baseline_texts: list[str]
    texts: list[str]
    mt_scores: list[np.ndarray] = field(repr=False)
    similarities: list[np.ndarray] = field(repr=False)
    combined: list[np.ndarray] = field(repr=False)

    @property
    def n_changed(self) -> int:
        """Sentences whose choice differs from the baseline's."""
        return sum(a != b for a, b in zip(self.baseline, self.chosen))


def _check_weight(weight: float) -> float:
    try:
        w = float(weight)
    except (TypeError, ValueError):
        raise ValueError(f"weight must be a number in [0, 1], got {weight!r}") from None
    if not 0.0 <= w <= 1.0:
        raise ValueError(f"weight must be in [0, 1] (0 = translation score only, 1 = image only), got {w}")
    return w


def _cosine(images: np.ndarray, texts: np.ndarray) -> np.ndarray:
    a = images / np.maximum(np.linalg.norm(images, axis=1, keepdims=True), 1e-12)
    b = texts / np.maximum(np.linalg.norm(texts, axis=1, keepdims=True), 1e-12)
    return a @ b.T


def rerank(
    nbest: Sequence[Sequence[Hypothesis]] | str | os.PathLike,
    sources_photos: Any,
    model: Any,
    weight: float = 0.5,
    lang: str = "de",
) -> RerankResult:
    """Re-rank every n-best list with the photo of its source sentence.

    nbest:          ``read_nbest`` output (or a path to a Moses n-best file)
    sources_photos: the photo of each sentence, in sentence order: paths / PIL images (encoded with
                    ``model.encode_image``) or an (n_sentences, d) array of image embeddings already encoded
    model:          ``encode_text(texts, lang)``; ``encode_image(photos)`` unless embeddings are given;
                    ``similarity(image_emb, text_emb) -> (n_img, n_txt)`` if it has one, else cosine
    weight:         w in [0, 1]; 0 = baseline (translation score only), 1 = image similarity only
    lang:           language of the hypotheses (the target language)
    """
    w = _check_weight(weight)
    lang = check_language(lang, where="rerank")
    known = getattr(model, "languages", None)
    if known is not None and lang not in known:
        raise ValueError(f"the model has no {lang!r} text encoder (languages: {', '.join(known)})")
    lists = read_nbest(nbest) if isinstance(nbest, (str, os.PathLike)) else [list(h) for h in nbest]
    if not lists or any(len(h) == 0 for h in lists):
        raise ValueError("every sentence needs at least one hypothesis")
    n = len(lists)

    if isinstance(sources_photos, np.ndarray) or hasattr(sources_photos, "detach"):
        img = np.asarray(
            sources_photos.detach().cpu() if hasattr(sources_photos, "detach") else sources_photos, dtype=np.float32
        )
        if img.ndim != 2:
            raise ValueError(f"image embeddings must be (n_sentences, d), got shape {img.shape}")
    else:
        photos = list(sources_photos)
        if len(photos) != n:
            raise ValueError(f"{len(photos)} photos for {n} n-best lists: need one photo per source sentence")
        img = np.asarray(model.encode_image(photos), dtype=np.float32)
    if img.shape[0] != n:
        raise ValueError(f"{img.shape[0]} photos for {n} n-best lists: need one photo per source sentence")

    unique = list(dict.fromkeys(h.text for hyps in lists for h in hyps))
    txt = np.asarray(model.encode_text(unique, lang), dtype=np.float32)
    if txt.ndim != 2 or txt.shape[0] != len(unique):
        raise ValueError(f"encode_text returned shape {txt.shape} for {len(unique)} hypotheses")
    row = {t: i for i, t in enumerate(unique)}
    score_fn = getattr(model, "similarity", None)

    baseline, chosen, mts, sims, combs = [], [], [], [], []
    for i, hyps in enumerate(lists):
        mt = np.array([h.score for h in hyps], dtype=np.float64)
        t = txt[[row[h.text] for h in hyps]]
        s = score_fn(img[i : i + 1], t) if score_fn is not None else _cosine(img[i : i + 1], t)
        s = np.asarray(s.detach().cpu() if hasattr(s, "detach") else s, dtype=np.float64).reshape(-1)
        if s.shape[0] != len(hyps):
            raise ValueError(f"similarity returned {s.shape[0]} scores for the {len(hyps)} hypotheses of sentence {i}")
        if not np.isfinite(s).all():
            raise ValueError(f"the model's image-hypothesis similarity is NaN/inf for sentence {i}")
        c = combine_scores(mt, s, w)
        baseline.append(_best(mt, mt))
        chosen.append(_best(c, mt))
        mts.append(mt)
        sims.append(s)
        combs.append(c)
    return RerankResult(
        w,
        lang,
        baseline,
        chosen,
        [lists[i][j].text for i, j in enumerate(baseline)],
        [lists[i][j].text for i, j in enumerate(chosen)],
        mts,
        sims,
        combs,
    )


# ------------------------------------------------------------------------------------------ metrics


def _ref_streams(references: Sequence[str] | Sequence[Sequence[str]], n: int) -> list[list[str]]:
    if not references:
        raise ValueError("no references")
    streams = [list(references)] if isinstance(references[0], str) else [list(r) for r in references]
    for k, s in enumerate(streams):
        if len(s) != n:
            raise ValueError(f"reference set {k} has {len(s)} lines for {n} hypotheses")
    return streams


def _asian(lang: str | None) -> bool:
    return lang in CJK_LANGUAGES


def _bleu_options(lang: str | None, tokenize: str | None) -> dict[str, Any]:
    """sacrebleu's zh tokeniser for Chinese; for Japanese, characters unless a tokeniser is named
    (sacrebleu's ja-mecab needs the optional mecab-python3 + ipadic, not installed with polyvse)."""
    if tokenize is None and lang == "ja":
        return {"tokenize": "char"}
    return {"tokenize": tokenize, "trg_lang": lang if lang == "zh" else ""}


def translation_scores(
    hypotheses: Sequence[str],
    references: Sequence[str] | Sequence[Sequence[str]],
    *,
    lang: str | None = None,
    tokenize: str | None = None,
) -> dict[str, Any]:
    """Corpus BLEU and TER (sacrebleu) of ``hypotheses`` against one reference per line, or several
    reference sets (a list of lists, each aligned with the hypotheses).

    Returns ``{"bleu": float, "ter": float, "bleu_signature": str, "ter_signature": str}``.
    """
    from sacrebleu.metrics import BLEU, TER

    hyps = list(hypotheses)
    refs = _ref_streams(references, len(hyps))
    bleu = BLEU(**_bleu_options(lang, tokenize))
    ter = TER(asian_support=_asian(lang))
    b = bleu.corpus_score(hyps, refs)
    t = ter.corpus_score(hyps, refs)
    return {
        "bleu": float(b.score),
        "ter": float(t.score),
        "bleu_signature": str(bleu.get_signature()),
        "ter_signature": str(ter.get_signature()),
    }


def oracle_choice(
    nbest: Sequence[Sequence[Hypothesis]],
    references: Sequence[str] | Sequence[Sequence[str]],
    *,
    lang: str | None = None,
    tokenize: str | None = None,
) -> list[int]:
    """Per list, the hypothesis with the highest sentence BLEU (sacrebleu, effective order) against the
    reference(s); ties -> earlier in the list. An upper bound on what re-ranking can reach (approximately:
    the best corpus BLEU is not exactly the sum of the best sentence BLEUs)."""
    from sacrebleu.metrics import BLEU

    refs = _ref_streams(references, len(nbest))
    bleu = BLEU(effective_order=True, **_bleu_options(lang, tokenize))
    out = []
    for i, hyps in enumerate(nbest):
        r = [s[i] for s in refs]
        scores = [bleu.sentence_score(h.text, r).score for h in hyps]
        out.append(int(np.argmax(scores)))
    return out
