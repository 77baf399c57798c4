"""One exclusion set per training run: every photo and every sentence that an evaluation the run (or a task it
reports) uses, applied wherever a training corpus is built -- image-training captions, translation augmentation,
text-only caption tuples, teacher pairs, adaptation files, and anything added later.

The evaluations polyvse reports, and what they use:
- image-sentence retrieval on the run's evaluation photos (``split: official`` -> val or test, ``fold<i>of<k>`` ->
  the fold's test photos), and Flickr8K's official val and test photos (F8K-ML, f8k-full, README's tables);
- cross-lingual caption retrieval on Multi30K's test photos (task1 ``test_2016_flickr``, task2 ``test_2016``) and on
  the Flickr8K test photos (Multi30K lines, Flickr8K captions, Flickr8K-CN's human translations ``zhm``);
- zero-shot / adapted languages on the same photos (MultiScript30k's machine-translated lines);
- STS on SemEval sentence pairs.

Photos: all of the above, except the run's own image-training photos -- an evaluation never scores a pair of a
photo the run trained on (the cross-lingual task leaves them out), so they stay training data.
Sentences: by ``caption_key`` (case, spacing and final punctuation ignored), every sentence ANY source gives to an
excluded photo, the run's evaluation captions and every STS sentence: a generic sentence such as "A dog runs
through the grass ." that an evaluation scores may not reach training through another photo either.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import MissingDataError
from ._io import caption_key
from .flickr8k import Flickr8kReader
from .flickr8kcn import VARIANTS as CN_VARIANTS, Flickr8kCnReader, flickr8kcn_dir, official_split
from .multi30k import Multi30kReader, multi30k_test_photo_ids

#: Flickr8K-CN variants an evaluation reads: native captions (image retrieval in zh) and the human translations of
#: the test captions (cross-lingual en-zh); its machine translations zhb/zhg are training data only
EVALUATED_ZH_VARIANTS = ("zhc", "zhm")

__all__ = [
    "EvaluationExclusion",
    "evaluation_exclusion",
    "evaluation_photo_ids",
    "evaluation_sentence_keys",
    "flickr8k_eval_photo_ids",
    "sentences_of_photos",
]


@dataclass(frozen=True)
class EvaluationExclusion:
    """Photos and sentences (caption keys) no training path may return."""

    photo_ids: frozenset[str]
    text_keys: frozenset[str]

    def excludes(self, photo_id: str | None, text: str) -> bool:
        return (photo_id is not None and photo_id in self.photo_ids) or caption_key(text) in self.text_keys

    def filter_captions(self, captions: Iterable) -> list:
        """The captions (anything with ``photo_id`` and ``text``) that may train."""
        return [c for c in captions if not self.excludes(c.photo_id, c.text)]

    def summary(self) -> dict:
        return {"photos": len(self.photo_ids), "sentences": len(self.text_keys)}


def flickr8k_eval_photo_ids(root: str | os.PathLike) -> set[str]:
    """Every photo of Flickr8K's official val and test lists (by Flickr id), files at hand or not."""
    return {pid for pid, s in official_split(root).items() if s in ("val", "test")}


def evaluation_photo_ids(root: str | os.PathLike) -> set[str]:
    """Flickr8K's official val/test photos and Multi30K's test photos (whether their files are at hand or not)."""
    return flickr8k_eval_photo_ids(root) | multi30k_test_photo_ids(root)


def sentences_of_photos(
    root: Path,
    f8k: Flickr8kReader,
    cn: Flickr8kCnReader,
    photo_ids: frozenset,
    zh_variants: Sequence[str],
    *,
    every_variant_at_hand: bool = True,
) -> set:
    """Caption keys of every sentence Flickr8K, Multi30K and Flickr8K-CN (`zh_variants`, and with
    `every_variant_at_hand` every variant whose file is there) give to ``photo_ids``, whatever the language filter."""
    keys = set()
    for r, key in zip(f8k.rows(), f8k.caption_keys()):
        if r.photo_id in photo_ids:
            keys.add(key)
    for f in Multi30kReader(root).files():
        for (pid, _), key in zip(f.pairs, f.keys()):
            if pid in photo_ids:
                keys.add(key)
    for v in ("zhc", "zhb", "zhg", "zhm"):
        if v in zh_variants or (every_variant_at_hand and (flickr8kcn_dir(root) / CN_VARIANTS[v][0]).is_file()):
            for r, key in zip(cn.records(v), cn.caption_keys(v)):
                if r.photo_id in photo_ids:
                    keys.add(key)
    return keys


def evaluation_sentence_keys(root: str | os.PathLike, photo_ids: Iterable[str]) -> set[str]:
    """Caption keys of every sentence any source at hand gives to `photo_ids`, and of every STS sentence."""
    root = Path(root)
    return set(_sentence_keys(root, frozenset(photo_ids), _stamp(root)))


def evaluation_exclusion(
    root: str | os.PathLike,
    *,
    eval_photo_ids: Iterable[str] = (),
    eval_texts: Sequence[str] = (),
    train_photo_ids: Iterable[str] = (),
) -> EvaluationExclusion:
    """The exclusion set of a run (module docstring): `eval_photo_ids` / `eval_texts` are the run's own evaluation
    photos and captions, `train_photo_ids` the photos it trains on with their images. Without arguments: the
    exclusion of the text-only corpora (every evaluation photo and sentence polyvse knows)."""
    photos = (evaluation_photo_ids(root) | set(eval_photo_ids)) - set(train_photo_ids)
    keys = evaluation_sentence_keys(root, photos) | {caption_key(t) for t in eval_texts}
    return EvaluationExclusion(frozenset(photos), frozenset(keys))


def _stamp(root: Path) -> tuple:
    """What the sentence keys depend on: the corpus folders' modification times (an edited corpus is re-read)."""
    names = ("flickr8k", "multi30k", "flickr8kcn", "multiscript30k", "sts")
    return tuple((n, (root / n).stat().st_mtime_ns if (root / n).exists() else None) for n in names)


@functools.lru_cache(maxsize=8)
def _sentence_keys(root: Path, photo_ids: frozenset[str], _stamp: tuple) -> frozenset[str]:
    from .multiscript30k import MultiScript30kReader, multiscript30k_dir
    from .sts import STS_SETS, load_sts

    keys = set()
    if (root / "flickr8k").is_dir():
        keys |= sentences_of_photos(
            root,
            Flickr8kReader(root, captions="all"),
            Flickr8kCnReader(root),
            photo_ids,
            EVALUATED_ZH_VARIANTS,
            every_variant_at_hand=False,
        )
    if multiscript30k_dir(root).is_dir():
        keys |= {caption_key(ln.text) for ln in MultiScript30kReader(root).all_lines() if ln.photo_id in photo_ids}
    if (root / "sts").is_dir():
        for name in STS_SETS:
            try:
                sts = load_sts(root, name)
            except MissingDataError:  # a set not at hand is not evaluated either
                continue
            keys |= {caption_key(s) for pair in sts.pairs for s in pair}
    return frozenset(keys)
