"""F8K-ML, the default dataset: the Flickr8K photos at hand with every caption available for them in
five languages, plus the text-only training corpora built around it.

Photos: the `*.jpg` files in `<root>/flickr8k/images` (850 in the public mirror), Photo.id = Flickr id.
Captions, matched by Flickr id:
  en  Flickr8K (`flickr8k/captions.txt`, source "flickr8k"), Multi30K task1 ("multi30k-task1") and
      task2 ("multi30k-task2"), any Multi30K split
  de  Multi30K task1 (translation of the task1 English line) and task2 (5 independent captions)
  fr, cs  Multi30K task1
  zh  Flickr8K-CN written by native speakers (`flickr8kzhc`, source "flickr8kcn-zhc")
Caption.split: the photo's split in the standard Flickr8K split (`flickr8kcn/data/flickr8k{train,val,
test}.txt`) restricted to these photos. Photos in none of the three lists (9 in the mirror; the
split lists cover 8000 of Flickr8K's 8091 photos) are never evaluation photos: they go to
`unlisted_split` ("train" by default).

De-duplication (on by default): Multi30K task2's English captions are the Flickr30K captions, which
for Flickr8K photos are mostly the Flickr8K captions again (tokenised differently), and the task1
English line is one of them. The same sentence for the same photo is kept once, by the first source
in this order: flickr8k, multi30k-task1, multi30k-task2, Flickr8K-CN. Sentences are compared by
`caption_key` (case, whitespace and final full stop ignored). Pass dedupe=False to keep every copy.

Evaluation hygiene: evaluation photos are the F8K-ML photos of the val and test splits
(`evaluation_photo_ids`, 221 photos). `text_only_corpus` drops every caption of the photos it is told
to exclude, by Flickr id, from every source; the registry's "f8k-ml-text" corpus excludes the
evaluation photos and, by default, also any sentence identical (by `caption_key`) to one of their
captions. With k-fold evaluation over all photos, exclude the fold's test photos (or exclude="all").
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..errors import DataError
from ..languages import check_language
from ._io import bulk_allocation, caption_key
from .exclusion import sentences_of_photos
from .flickr8k import SOURCE as FLICKR8K_SOURCE, Flickr8kReader
from .flickr8kcn import VARIANTS as CN_VARIANTS, Flickr8kCnReader, official_split
from .multi30k import Multi30kReader, multi30k_test_photo_ids
from .splits import kfold_photo_splits
from .types import Caption, Corpus, Photo

__all__ = [
    "load_f8kml",
    "kfold_photo_splits",
    "text_only_corpus",
    "evaluation_photo_ids",
    "load_f8kml_text",
    "caption_key",
    "TEXT_ONLY_ZH_VARIANTS",
]

NAME = "f8k-ml"
#: Flickr8K-CN variants used by the text-only corpora: native, Baidu MT, Google MT.
TEXT_ONLY_ZH_VARIANTS = ("zhc", "zhb", "zhg")
EVAL_SPLITS = ("val", "test")


def _photo_splits(root: Path, photo_ids: Iterable[str], unlisted_split: str) -> dict[str, str]:
    official = official_split(root)
    return {pid: official.get(pid, unlisted_split) for pid in photo_ids}


def load_f8kml(
    root: str | os.PathLike, *, dedupe: bool = True, unlisted_split: str = "train", langs: Iterable[str] | None = None
) -> Corpus:
    """The F8K-ML corpus (see the module docstring). Prints nothing; parsed files are cached in-process."""
    root = Path(root)
    lang_set = {check_language(lang) for lang in langs} if langs is not None else None
    f8k = Flickr8kReader(root, captions="photos")
    files = f8k.photo_files()
    if not files:
        raise DataError(
            "no photos (*.jpg) in the Flickr8K photo folder; run `polyvse data fetch flickr8k`", f8k.images_dir
        )
    split = _photo_splits(root, files, unlisted_split)
    wanted = frozenset(files)

    per_photo: dict[str, list[Caption]] = {pid: [] for pid in sorted(files)}

    def add(pid: str, lang: str, text: str, source: str) -> None:
        if lang_set is None or lang in lang_set:
            per_photo[pid].append(Caption(pid, lang, text, source, split[pid]))

    with bulk_allocation():
        _collect(root, f8k, wanted, add)

    captions: list[Caption] = []
    for caps in per_photo.values():
        captions.extend(_dedupe(caps) if dedupe else caps)
    photos = {pid: Photo(pid, files[pid]) for pid in per_photo}
    return Corpus(NAME, photos, captions)


def _collect(root: Path, f8k: Flickr8kReader, wanted: frozenset, add) -> None:
    """Every caption at hand for the photos in `wanted`: Flickr8K en (from `f8k`'s caption file; with
    captions="photos" a caption of a photo not in `wanted` is an error, with "all" it is skipped),
    Multi30K task1 + task2 (any split), Flickr8K-CN native zh."""
    for r in f8k.rows():
        if r.photo_id not in wanted:
            if f8k.captions == "all":
                continue
            raise DataError(
                f"caption for {r.image}, which is not in {f8k.images_dir}; re-fetch with `polyvse data fetch flickr8k`",
                f8k.captions_path,
                r.line,
            )
        add(r.photo_id, "en", r.text, FLICKR8K_SOURCE)
    for rec in Multi30kReader(root).records(only=wanted):  # task1 then task2, all splits
        add(rec.photo_id, rec.lang, rec.text, rec.source)
    for rec in Flickr8kCnReader(root, variants=("zhc",)).records():
        if rec.photo_id in wanted:
            add(rec.photo_id, rec.lang, rec.text, rec.source)


def _dedupe(caps: Iterable[Caption], seen: set | None = None) -> list[Caption]:
    seen = set() if seen is None else seen
    out = []
    for c in caps:
        key = (c.photo_id, c.lang, caption_key(c.text))
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def evaluation_photo_ids(root: str | os.PathLike, corpus: Corpus | None = None) -> set[str]:
    """F8K-ML photos in the val or test split: none of their captions may reach a training corpus."""
    corpus = corpus if corpus is not None else load_f8kml(root)
    return {c.photo_id for c in corpus.captions if c.split in EVAL_SPLITS} | {
        pid for pid, s in _photo_splits(Path(root), corpus.photos, "train").items() if s in EVAL_SPLITS
    }


def text_only_corpus(
    root: str | os.PathLike,
    exclude_photo_ids: Iterable[str],
    langs: Iterable[str] | None = None,
    *,
    zh_variants: Sequence[str] = TEXT_ONLY_ZH_VARIANTS,
    dedupe: bool = True,
    exclude_texts: Iterable[str] | None = None,
    drop_excluded_texts: bool = False,
    name: str = "f8k-ml-text",
    sources: Iterable[str] | None = None,
) -> Corpus:
    """Text-only training captions: all Multi30K (task1 + task2, every split), all Flickr8K
    (`all_captions.txt`) and Flickr8K-CN (`zh_variants`: native zhc and machine-translated zhb/zhg,
    sources "flickr8kcn-zh?") captions whose photo is NOT in `exclude_photo_ids` (by Flickr id).

    `exclude_photo_ids` is required (pass an empty set explicitly to keep everything). Photos have
    path None; Caption.split is "train". `langs` keeps only those languages. `exclude_texts` drops
    any caption whose `caption_key` equals that of one of these texts; `drop_excluded_texts=True`
    also drops every sentence identical to a caption that any source here (or Flickr8K-CN's zhm
    human translations) gives to an excluded photo. De-duplication as in F8K-ML
    (same photo + language + caption_key kept once; order flickr8k, multi30k-task1, multi30k-task2,
    then the Flickr8K-CN variants in the order given). `sources` keeps only captions of these sources
    (e.g. {"multi30k-task1", "multi30k-task2"}; de-duplication among them only; None = all).
    """
    if exclude_photo_ids is None or isinstance(exclude_photo_ids, str):
        raise TypeError("exclude_photo_ids must be a collection of photo ids (use set() to exclude none)")
    root = Path(root)
    drop = frozenset(exclude_photo_ids)
    lang_set = {check_language(lang) for lang in langs} if langs is not None else None
    bad_texts = {caption_key(t) for t in exclude_texts} if exclude_texts is not None else set()
    for v in zh_variants:
        if v not in CN_VARIANTS or CN_VARIANTS[v][1] != "zh":
            raise DataError(f"unknown Chinese Flickr8K-CN variant {v!r}; use zhc, zhb, zhg or zhm")

    f8k = Flickr8kReader(root, captions="all")
    cn = Flickr8kCnReader(root, variants=zh_variants or ("zhc",))
    streams = _caption_streams(root, f8k, cn, lang_set, zh_variants)
    if sources is not None:
        keep = frozenset(sources)
        streams = [s for s in streams if s[3] in keep]
    if drop_excluded_texts and drop:
        bad_texts = bad_texts | sentences_of_photos(root, f8k, cn, drop, zh_variants)
    return _text_only_captions(name, streams, drop, bad_texts, dedupe)


#: (photo_id, text) pairs, their caption keys, language, source
_Stream = tuple[Iterable[tuple[str, str]], tuple[str, ...], str, str]


def _caption_streams(
    root: Path, f8k: Flickr8kReader, cn: Flickr8kCnReader, lang_set: set[str] | None, zh_variants: Sequence[str]
) -> list[_Stream]:
    """The text-only sources' captions, source by source in de-duplication priority order."""
    m30k_langs = None if lang_set is None else sorted(lang_set & {"en", "de", "fr", "cs"})
    streams: list[_Stream] = []
    if lang_set is None or "en" in lang_set:
        rows = f8k.rows()
        streams.append((((r.photo_id, r.text) for r in rows), f8k.caption_keys(), "en", FLICKR8K_SOURCE))
    if m30k_langs is None or m30k_langs:
        for f in Multi30kReader(root, langs=m30k_langs).files():
            streams.append((f.pairs, f.keys(), f.lang, f.source))
    if lang_set is None or "zh" in lang_set:
        for v in zh_variants:
            _file, lang, source = CN_VARIANTS[v]
            recs = cn.records(v)
            streams.append((((r.photo_id, r.text) for r in recs), cn.caption_keys(v), lang, source))
    return streams


def _text_only_captions(name: str, streams: list[_Stream], drop: frozenset, bad_texts: set, dedupe: bool) -> Corpus:
    seen: set = set()
    captions: list[Caption] = []
    append, seen_add, make = captions.append, seen.add, Caption
    with bulk_allocation():
        for pairs, keys, lang, source in streams:  # hot loop (~600k captions)
            for (pid, text), key in zip(pairs, keys):
                if pid in drop or key in bad_texts:
                    continue
                if dedupe:
                    k = (pid, lang, key)
                    if k in seen:
                        continue
                    seen_add(k)
                append(make(pid, lang, text, source, "train"))
        photos = {pid: Photo(pid, None) for pid in dict.fromkeys(c.photo_id for c in captions)}
    return Corpus(name, photos, captions)


def load_f8kml_text(
    root: str | os.PathLike,
    *,
    langs: Iterable[str] | None = None,
    exclude: str = "eval",
    drop_eval_texts: bool = True,
    zh_variants: Sequence[str] = TEXT_ONLY_ZH_VARIANTS,
) -> Corpus:
    """The "f8k-ml-text" training corpus: `text_only_corpus` without the F8K-ML evaluation photos.

    exclude="eval": drop the val + test photos of F8K-ML (the official-split evaluation photos);
    exclude="all": drop every F8K-ML photo (use this with k-fold evaluation over all 850 photos).
    drop_eval_texts: also drop sentences identical (caption_key) to any caption that any source
    (Flickr8K, Multi30K, Flickr8K-CN zhc/zhb/zhg/zhm) gives to an excluded photo, e.g. generic ones
    like "A dog runs through the grass ." that other photos share (about 1.3k of 519k captions).
    """
    f8kml = load_f8kml(root)
    if exclude == "eval":  # Multi30K's test photos are the cross-lingual task's: never text-side training data
        ids = evaluation_photo_ids(root, f8kml) | multi30k_test_photo_ids(root)
    elif exclude == "all":
        ids = set(f8kml.photos)
    else:
        raise DataError(f"exclude must be 'eval' or 'all', not {exclude!r}")
    texts = [c.text for c in f8kml.captions if c.photo_id in ids] if drop_eval_texts else None
    name = "f8k-ml-text" if exclude == "eval" else "f8k-ml-text-all-photos-excluded"
    return text_only_corpus(
        root, ids, langs, zh_variants=zh_variants, exclude_texts=texts, drop_excluded_texts=drop_eval_texts, name=name
    )
