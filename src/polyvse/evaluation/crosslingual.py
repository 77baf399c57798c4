"""Cross-lingual caption retrieval: R@1/5/10 both ways between aligned captions of two languages.

Ranking goes through :func:`polyvse.evaluation.retrieval.cross_lingual_retrieval` (itself
:func:`polyvse.evaluation.ranking.retrieval_metrics`): each query has exactly one gold item, the caption aligned
with it; ties are pessimistic. Scores are the cosine of the text embeddings unless a ``score_fn`` is given.
:class:`CrossLingualEvaluator` runs the protocol on the F8K-ML test photos and Multi30K test_2016, leaving out the
pairs of the model's training photos.

Which captions are paired (one pair per photo)
----------------------------------------------

``multi30k-test_2016`` (text only; :func:`crosslingual_pairs_multi30k`)
    Multi30K task1 ``test_2016_flickr``: line i of ``test_2016_flickr.{src,tgt}.gz``, in file order. The
    de/fr/cs lines are professional translations of the English line, so en<->de/fr/cs are true parallel
    pairs (and de<->fr etc. are parallel through the English original). 1000 pairs for every pair of en/de/fr/cs.
    There is no Chinese in Multi30K: pairs with zh are not evaluated on this corpus.

``f8k-ml-test`` (:func:`crosslingual_pairs_f8kml`)
    The F8K-ML test photos: the 125 photos at hand in the standard Flickr8K test split, in ascending id order.

    * en/de/fr/cs with each other: the photo's Multi30K task1 line in each language (whatever Multi30K
      split the photo sits in; 107 of these photos are in Multi30K *train*, which only matters for models
      trained on Multi30K text without excluding the evaluation photos -- polyvse's text corpora do exclude
      them). The English side is the task1 English line itself (the sentence that was translated), not a
      Flickr8K caption. 117 of the 125 test photos have task1 lines: 117 pairs.
    * en<->zh, ``zh_source="zhm"`` (default): true translations too. Flickr8K-CN ships human translations of
      the Flickr8K test captions (``flickr8kzhmtest.captions.txt``, ``#zhm#k`` translates ``#enc#k``); the
      pair is the photo's first English Flickr8K caption (``#enc#0``, identical to the first line of
      ``flickr8k/captions.txt`` for the photo) and its human translation ``#zhm#0``. 125 pairs.
    * en<->zh, ``zh_source="zhc"``: photo-level matching instead of translations: the first Flickr8K English
      caption (``#enc#0``) against the first caption written independently by a native speaker
      (``#zhc#0``, the Chinese captions F8K-ML trains and evaluates image retrieval with). These describe
      the same photo but are not translations of each other, so expect lower recalls: this measures
      something closer to image retrieval through text. 125 pairs.
    * zh with de/fr/cs: no aligned data; asking for it is an error.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..data._io import read_lines, require_file
from ..data.flickr8k import Flickr8kReader
from ..data.flickr8kcn import VARIANTS as CN_VARIANTS, Flickr8kCnReader, flickr8kcn_dir, official_split
from ..data.multi30k import TASK1_LANGS, Multi30kReader
from ..errors import DataError
from ..languages import check_language
from .base import Evaluator
from .report import markdown_table
from .retrieval import ScoreFn, cosine_scores, cross_lingual_retrieval

log = logging.getLogger("polyvse.evaluation")

__all__ = [
    "CORPORA",
    "DEFAULT_PAIRS",
    "TABLE_KEYS",
    "CaptionPairs",
    "crosslingual_pairs",
    "crosslingual_pairs_f8kml",
    "crosslingual_pairs_multi30k",
    "crosslingual_table",
    "evaluate_crosslingual",
    "parse_pair",
]

F8KML_TEST = "f8k-ml-test"
MULTI30K_TEST = "multi30k-test_2016"
#: Corpora of :func:`evaluate_crosslingual`, in report order.
CORPORA: tuple[str, ...] = (F8KML_TEST, MULTI30K_TEST)
DEFAULT_PAIRS: tuple[str, ...] = ("en-de", "en-fr", "en-cs", "en-zh")
#: Columns of :func:`crosslingual_table` (a = first language of the pair, b = second).
TABLE_KEYS: tuple[str, ...] = ("a2b_r1", "a2b_r5", "a2b_r10", "b2a_r1", "b2a_r5", "b2a_r10", "rsum", "n_pairs")
ZH_SOURCES = ("zhm", "zhc")
_MULTI30K_SPLITS = {"test_2016": "test_2016_flickr", "test": "test_2016_flickr"}


@dataclass(frozen=True)
class CaptionPairs:
    """Aligned captions: ``src_texts[i]`` (language ``src``) goes with ``tgt_texts[i]`` (``tgt``), both about
    photo ``photo_ids[i]``. ``kind`` is "translation" (parallel sentences) or "photo" (same photo only)."""

    corpus: str
    src: str
    tgt: str
    photo_ids: tuple[str, ...]
    src_texts: tuple[str, ...]
    tgt_texts: tuple[str, ...]
    kind: str
    source: str  # where the sentences come from, in words

    def __len__(self) -> int:
        return len(self.photo_ids)


def parse_pair(pair: str | Sequence[str]) -> tuple[str, str]:
    """ "en-de" or ("en", "de") -> ("en", "de"), validated (known, distinct language codes)."""
    if isinstance(pair, str):
        parts = pair.split("-")
        if len(parts) != 2:
            raise ValueError(f"language pair {pair!r} must look like 'en-de'")
    else:
        parts = list(pair)
        if len(parts) != 2:
            raise ValueError(f"language pair {pair!r} must have two languages")
    a = check_language(parts[0], where=f"language pair {pair!r}")
    b = check_language(parts[1], where=f"language pair {pair!r}")
    if a == b:
        raise ValueError(f"language pair {pair!r} names the same language twice")
    return a, b


def _without(p: CaptionPairs, excluded: frozenset) -> CaptionPairs:
    """``p`` without the pairs of the ``excluded`` photos."""
    keep = [i for i, pid in enumerate(p.photo_ids) if pid not in excluded]
    if len(keep) == len(p):
        return p
    return CaptionPairs(
        p.corpus,
        p.src,
        p.tgt,
        tuple(p.photo_ids[i] for i in keep),
        tuple(p.src_texts[i] for i in keep),
        tuple(p.tgt_texts[i] for i in keep),
        p.kind,
        p.source,
    )


def _swap(p: CaptionPairs) -> CaptionPairs:
    return CaptionPairs(p.corpus, p.tgt, p.src, p.photo_ids, p.tgt_texts, p.src_texts, p.kind, p.source)


# ------------------------------------------------------------------------------------------- Multi30K


def crosslingual_pairs_multi30k(root: str | os.PathLike, src: str, tgt: str, split: str = "test_2016") -> CaptionPairs:
    """Line-aligned Multi30K task1 captions of ``split`` (default the 2016 test set: 1000 pairs).

    ``split``: "test_2016" (= "test_2016_flickr"), "val" or "train". Languages: en, de, fr, cs.
    """
    src, tgt = parse_pair((src, tgt))
    for lang in (src, tgt):
        if lang not in TASK1_LANGS:
            raise DataError(f"Multi30K task1 has {', '.join(TASK1_LANGS)} captions, no {lang!r}")
    m_split = _MULTI30K_SPLITS.get(split, split)
    files = {f.lang: f for f in Multi30kReader(root, tasks=("task1",), splits=(m_split,), langs=(src, tgt)).files()}
    a, b = files[src], files[tgt]
    ids_a = tuple(pid for pid, _ in a.pairs)
    if ids_a != tuple(pid for pid, _ in b.pairs):  # same image list, so only a corrupted cache could do this
        raise DataError(f"{src} and {tgt} files are not aligned with the same image list", b.path)
    return CaptionPairs(
        f"multi30k-{split}",
        src,
        tgt,
        ids_a,
        tuple(t for _, t in a.pairs),
        tuple(t for _, t in b.pairs),
        "translation",
        f"Multi30K task1 {m_split} lines ({a.path.name}, {b.path.name})",
    )


# --------------------------------------------------------------------------------------------- F8K-ML


def f8kml_test_photo_ids(root: str | os.PathLike) -> list[str]:
    """The F8K-ML test photos: photos at hand in flickr8k/images that the standard split puts in test."""
    files = Flickr8kReader(root).photo_files()
    if not files:
        raise DataError(
            "no photos (*.jpg) in the Flickr8K photo folder; run `polyvse data fetch flickr8k`",
            Flickr8kReader(root).images_dir,
        )
    split = official_split(root)
    return sorted(pid for pid in files if split.get(pid) == "test")


def _first_caption(root: Path, variant: str, wanted: set[str]) -> dict[str, str]:
    """photo id -> caption ``#<variant>#0`` of a Flickr8K-CN file (the k is read from the line itself)."""
    path = require_file(flickr8kcn_dir(root) / CN_VARIANTS[variant][0], f"Flickr8K-CN {variant} captions", "flickr8kcn")
    raw = read_lines(path)
    out: dict[str, str] = {}
    for rec in Flickr8kCnReader(root).records(variant):
        if rec.photo_id not in wanted or rec.photo_id in out:
            continue
        k = raw[rec.line - 1].partition(" ")[0].split("#")[2]
        if k == "0":
            out[rec.photo_id] = rec.text
    return out


def crosslingual_pairs_f8kml(root: str | os.PathLike, src: str, tgt: str, *, zh_source: str = "zhm") -> CaptionPairs:
    """Aligned captions of the F8K-ML test photos (definitions in the module docstring).

    en/de/fr/cs: Multi30K task1 lines of the test photos (117 pairs). en-zh: Flickr8K caption #0 and its
    human translation (``zh_source="zhm"``, 125 pairs) or the first native Chinese caption
    (``zh_source="zhc"``, photo-level, 125 pairs).
    """
    src, tgt = parse_pair((src, tgt))
    root = Path(root)
    if zh_source not in ZH_SOURCES:
        raise ValueError(f"zh_source must be one of {ZH_SOURCES}, got {zh_source!r}")
    test = f8kml_test_photo_ids(root)
    wanted = set(test)
    if "zh" in (src, tgt):
        other = tgt if src == "zh" else src
        if other != "en":
            raise DataError(
                f"no aligned {other}-zh captions at hand: Chinese pairs exist only with English "
                "(Flickr8K-CN translates the English Flickr8K captions)"
            )
        en = _first_caption(root, "enc", wanted)
        zh = _first_caption(root, zh_source, wanted)
        ids = tuple(p for p in test if p in en and p in zh)
        if not ids:
            raise DataError(
                f"no F8K-ML test photo has both an English #enc#0 and a #{zh_source}#0 caption", flickr8kcn_dir(root)
            )
        if zh_source == "zhm":
            kind, what = "translation", "Flickr8K caption #0 and its Flickr8K-CN human translation (#zhm#0)"
        else:
            kind, what = "photo", "Flickr8K caption #0 and the first native Flickr8K-CN caption (#zhc#0)"
        pairs = CaptionPairs(
            F8KML_TEST, "en", "zh", ids, tuple(en[p] for p in ids), tuple(zh[p] for p in ids), kind, what
        )
        return pairs if src == "en" else _swap(pairs)
    for lang in (src, tgt):
        if lang not in TASK1_LANGS:  # e.g. ja
            raise DataError(f"F8K-ML has no aligned {lang!r} captions (languages: en, de, fr, cs, zh)")
    lines: dict[str, dict[str, str]] = {src: {}, tgt: {}}
    for rec in Multi30kReader(root, tasks=("task1",), langs=(src, tgt)).records(only=wanted):
        lines[rec.lang].setdefault(rec.photo_id, rec.text)  # Multi30K splits are disjoint: one line each
    ids = tuple(p for p in test if p in lines[src] and p in lines[tgt])
    if not ids:
        raise DataError("no F8K-ML test photo has Multi30K task1 captions", root / "multi30k")
    return CaptionPairs(
        F8KML_TEST,
        src,
        tgt,
        ids,
        tuple(lines[src][p] for p in ids),
        tuple(lines[tgt][p] for p in ids),
        "translation",
        "Multi30K task1 lines (all Multi30K splits) of the F8K-ML test photos",
    )


def crosslingual_pairs(
    corpus: str, root: str | os.PathLike, src: str, tgt: str, *, zh_source: str = "zhm"
) -> CaptionPairs:
    """Pairs of one of :data:`CORPORA` by name."""
    if corpus == F8KML_TEST:
        return crosslingual_pairs_f8kml(root, src, tgt, zh_source=zh_source)
    if corpus == MULTI30K_TEST:
        return crosslingual_pairs_multi30k(root, src, tgt, split="test_2016")
    raise ValueError(f"unknown cross-lingual corpus {corpus!r}; known: {', '.join(CORPORA)}")


# ----------------------------------------------------------------------------------------- evaluation


def evaluate_crosslingual(
    model: Any,
    root: str | os.PathLike,
    pairs: Iterable[str] = DEFAULT_PAIRS,
    *,
    corpora: Iterable[str] = CORPORA,
    zh_source: str = "zhm",
    score_fn: ScoreFn | None = None,
    strict: bool = False,
    exclude_photo_ids: Iterable[str] = (),
) -> dict[str, dict[str, dict]]:
    """Cross-lingual caption retrieval of ``model`` on each corpus and language pair.

    model: anything with ``encode_text(texts, lang) -> (n, d)``; if it has a ``languages`` attribute,
           pairs with a language outside it are left out (``strict=True``: raise instead).
    pairs: "a-b" strings; pairs involving zh are evaluated on F8K-ML only (Multi30K has no Chinese).
    exclude_photo_ids: photos whose pairs are left out -- pass the model's training photos: 31 Multi30K
           test_2016 photos are Flickr8K photos, whose task1 lines are F8K-ML training captions when the photo
           is in the training split. ``n_pairs`` reports what was evaluated.

    Returns ``{corpus: {"a-b": metrics}}`` with corpus in :data:`CORPORA` order; metrics are the
    :data:`~polyvse.evaluation.retrieval.CROSS_LINGUAL_KEYS` (``a2b_*``: queries in a, gallery in b;
    ``b2a_*``: the reverse; recalls in percent) plus ``n_pairs`` (gallery size) and ``kind``.
    """
    parsed = [parse_pair(p) for p in pairs]
    corpora = list(corpora)
    for c in corpora:
        if c not in CORPORA:
            raise ValueError(f"unknown cross-lingual corpus {c!r}; known: {', '.join(CORPORA)}")
    known = getattr(model, "languages", None)
    known = None if known is None else set(known)
    excluded = frozenset(exclude_photo_ids)
    cache: dict[tuple[str, tuple[str, ...]], np.ndarray] = {}

    def encode(texts: tuple[str, ...], lang: str) -> np.ndarray:
        key = (lang, texts)
        if key not in cache:
            emb = np.asarray(model.encode_text(list(texts), lang))
            if emb.ndim != 2 or emb.shape[0] != len(texts):
                raise ValueError(f"encode_text returned shape {emb.shape} for {len(texts)} {lang} texts")
            cache[key] = emb
        return cache[key]

    results: dict[str, dict[str, dict]] = {}
    for corpus in corpora:
        out: dict[str, dict] = {}
        for a, b in parsed:
            if corpus == MULTI30K_TEST and "zh" in (a, b):
                continue
            if known is not None and not {a, b} <= known:
                if strict:
                    raise ValueError(
                        f"the model has no {', '.join(sorted({a, b} - known))} text encoder "
                        f"(languages: {', '.join(sorted(known))})"
                    )
                continue
            p = _without(crosslingual_pairs(corpus, root, a, b, zh_source=zh_source), excluded)
            if not len(p):
                continue
            m: dict[str, Any] = cross_lingual_retrieval(
                encode(p.src_texts, a), encode(p.tgt_texts, b), score_fn=score_fn
            )
            m["n_pairs"] = len(p)
            m["kind"] = p.kind
            out[f"{a}-{b}"] = m
        results[corpus] = out
    return results


def crosslingual_table(results: dict[str, dict[str, dict]], keys: Sequence[str] = TABLE_KEYS) -> str:
    """One markdown table, a row per corpus and pair (a2b = first language -> second)."""
    rows = {f"{corpus} {pair}": m for corpus, per in results.items() for pair, m in per.items()}
    return markdown_table(rows, keys=keys, row_label="corpus, pair a-b")


def training_photo_ids(model: Any, root: Path) -> set[str] | None:
    """Photos the checkpoint trained on, recomputed from the config in its training metadata (None when a
    checkpoint carries no such metadata, e.g. one written by other code).

    The trainer records its config in the flat form (``polyvse_train.config.TrainConfig.to_dict``); of it, the
    data fields ``dataset``, ``split`` and ``eval_split`` say which photos trained, with the trainer's defaults
    for one that a config saved before the field existed lacks."""
    from ..data.registry import DEFAULT_DATASET, load_dataset
    from ..data.splits import DEFAULT_EVAL_SPLIT, OFFICIAL, resolve_split

    training = getattr(getattr(model, "checkpoint", None), "training", None)
    if callable(training):  # a numpy model's checkpoint config reads training.json when asked
        training = training()
    saved = (training or {}).get("config")
    if not saved:
        return None
    train, _ = resolve_split(
        load_dataset(saved.get("dataset", DEFAULT_DATASET), root),
        saved.get("split", OFFICIAL),
        saved.get("eval_split", DEFAULT_EVAL_SPLIT),
    )
    return train


class CrossLingualEvaluator(Evaluator):
    """``{corpus: {"a-b": metrics}}``; ``exclude_photo_ids`` None: the checkpoint's own training photos."""

    name = "crosslingual"

    def __init__(
        self, root: Path, exclude_photo_ids: Iterable[str] | None = None, pairs: Iterable[str] = DEFAULT_PAIRS
    ):
        self.root, self.exclude_photo_ids, self.pairs = Path(root), exclude_photo_ids, tuple(pairs)

    def scores(self, model: Any, lang: str | None = None) -> ScoreFn:
        return cosine_scores

    def evaluate(self, model: Any) -> dict:
        excluded = self.exclude_photo_ids
        if excluded is None:
            excluded = training_photo_ids(model, self.root)
            if excluded is None:
                log.warning("the checkpoint does not say which photos it trained on: no pair is excluded")
        return evaluate_crosslingual(
            model, self.root, self.pairs, exclude_photo_ids=excluded or (), score_fn=self.scores(model)
        )

    def table(self, result: dict) -> str:
        return crosslingual_table(result)
