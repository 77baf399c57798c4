"""Text-side training data at scale: caption tuples of photos that have no image in the training run.

A *caption tuple* is every caption of one photo across languages. The caption–caption terms of the zoo
(Gella's PARALLEL term, Calixto's multilingual ranking R_ML, MULE's neighbourhood constraints and its LP
pretraining on paired sentences) need no image, so they can also learn from the captions of photos whose
image files are not at hand:

  multi30k  Multi30K train + val, task1 (one caption per language en/de/fr/cs, translations of each other)
            and task2 (5 en + 5 de independent descriptions): ~30k photos. The papers' own training data.
  all       multi30k + Flickr8K (5 en per photo, `all_captions.txt`) + Flickr8K-CN native Chinese (zhc):
            Flickr8K photos that are also in Multi30K get one tuple holding both.

Machine translations (Flickr8K-CN zhb/zhg) are left out: they are MULE's translation augmentation, a
separate switch (`augment_translations`), and would make "all" mean two things at once.

Within a photo the same sentence (by `caption_key`) is kept once, from the first source in the order
flickr8k, multi30k-task1, multi30k-task2, flickr8kcn-zhc (as in F8K-ML).

Evaluation hygiene (`text_tuple_corpus`), always by photo id and then by text:
- every photo in `exclude_photo_ids` (the run's evaluation photos -- for k-fold splits the fold's test
  photos -- plus F8K-ML's official val/test photos) and every photo of Multi30K's test sets (the cross-lingual
  retrieval evaluation) is dropped, from every source;
- every sentence identical (by `caption_key`) to a caption that ANY source gives to one of those photos, or
  to one of `exclude_texts` (the run's evaluation captions), is dropped as well;
- photos in `skip_photo_ids` (the run's training photos, which already train with their images) are
  dropped by id only.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from ..errors import DataError
from ..languages import check_language
from .exclusion import EvaluationExclusion
from .f8kml import text_only_corpus
from .multi30k import SOURCES as MULTI30K_SOURCES, multi30k_test_photo_ids
from .types import Corpus

__all__ = ["TEXT_CORPORA", "TEXT_CORPUS_SOURCES", "multi30k_test_photo_ids", "text_tuple_corpus"]

#: text_corpus values: "none" adds nothing
TEXT_CORPORA = ("none", "multi30k", "all")
#: caption sources of each text corpus
TEXT_CORPUS_SOURCES = {
    "multi30k": frozenset(MULTI30K_SOURCES.values()),
    "all": frozenset(MULTI30K_SOURCES.values()) | {"flickr8k", "flickr8kcn-zhc"},
}


def text_tuple_corpus(
    root: str | os.PathLike,
    kind: str,
    *,
    exclude_photo_ids: Iterable[str],
    exclude_texts: Iterable[str] = (),
    skip_photo_ids: Iterable[str] = (),
    langs: Iterable[str] | None = None,
    min_languages: int = 2,
    exclusion: EvaluationExclusion | None = None,
) -> Corpus:
    """The captions of the text corpus `kind` ("multi30k" | "all"), cleaned as the module docstring says.

    `exclude_photo_ids` is required (the run's evaluation photos); Multi30K's test photos are always added
    to it. Only photos with captions in at least `min_languages` of `langs` are kept (a tuple needs two
    languages for a caption–caption term). Captions keep their photo id; Caption.split is "train"; photos
    have path None. `exclusion` (the run's evaluation exclusion) drops every caption it excludes, before the
    tuples are formed. Deterministic: captions come photo by photo in sorted photo-id order, sources in the
    order of `text_only_corpus` within a photo.
    """
    if kind not in TEXT_CORPUS_SOURCES:
        raise DataError(f"text corpus {kind!r}: use one of {', '.join(TEXT_CORPORA[1:])}")
    if exclude_photo_ids is None or isinstance(exclude_photo_ids, str):
        raise TypeError("exclude_photo_ids must be a collection of photo ids (use set() to exclude none)")
    root = Path(root)
    lang_list = [check_language(lang) for lang in langs] if langs is not None else None
    excluded = set(exclude_photo_ids) | multi30k_test_photo_ids(root)
    skip = frozenset(skip_photo_ids)
    sources = TEXT_CORPUS_SOURCES[kind]
    # only the kind's sources, de-duplicated among themselves: for "multi30k" a Multi30K caption must not
    # give way to the same sentence from Flickr8K
    base = text_only_corpus(
        root,
        excluded,
        lang_list,
        zh_variants=("zhc",) if kind == "all" else (),
        exclude_texts=list(exclude_texts),
        drop_excluded_texts=True,
        sources=sources,
        name=f"text-tuples-{kind}",
    )
    by_photo: dict[str, list] = {}
    for c in base.captions if exclusion is None else exclusion.filter_captions(base.captions):
        if c.photo_id not in skip:
            by_photo.setdefault(c.photo_id, []).append(c)
    captions = []
    for pid in sorted(by_photo):
        caps = by_photo[pid]
        if len({c.lang for c in caps}) >= min_languages:
            captions.extend(caps)
    photos = {pid: base.photos[pid] for pid in dict.fromkeys(c.photo_id for c in captions)}
    return Corpus(f"text-tuples-{kind}", photos, captions)
