"""F8K-full: the whole Flickr8K photo set at hand (7,941 photos, 224x224) with every caption available for
them in five languages, under the standard Flickr8K split (5,867 train / 983 val / 1,000 test photos).

Photos: the `*.jpg` files in `<root>/flickr8k-224/images` (Photo.id = Flickr id). They are squashed to
224x224 from the full frame; every photo, train or test, is used in this one version.
Captions, matched by Flickr id, exactly as in F8K-ML (see `polyvse.data.f8kml`):
  en  Flickr8K (`flickr8k/all_captions.txt`), Multi30K task1 and task2 (any Multi30K split)
  de  Multi30K task1 and task2;  fr, cs  Multi30K task1;  zh  Flickr8K-CN native (zhc)
with the same de-duplication (same photo + language + caption_key kept once).

Split: `flickr8kcn/data/flickr8k{train,val,test}.txt`. Photos in none of the lists (91 here) are left out
by default (`unlisted_split="drop"`), so the splits are exactly the official ones; pass "train" to train
on them too (they are in no evaluation split of Flickr8K).

Evaluation hygiene: 871 of the 1,000 test photos are in Multi30K's *train* split. A training corpus
takes only `split == "train"` captions of this corpus, and the text-only corpus `f8k-full-text`
excludes (by Flickr id) every photo of Flickr8K's val and test lists and of Multi30K's test sets - whether or
not its file is at hand - and every sentence an evaluation uses (`polyvse.data.exclusion`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..errors import DataError
from ..languages import check_language
from ._io import bulk_allocation, require_dir
from .exclusion import evaluation_exclusion, flickr8k_eval_photo_ids
from .f8kml import TEXT_ONLY_ZH_VARIANTS, _collect, _dedupe, text_only_corpus
from .flickr8k import Flickr8kReader, flickr_photo_files
from .flickr8kcn import official_split
from .types import Caption, Corpus, Photo

__all__ = ["load_f8kfull", "load_f8kfull_text", "f8kfull_images_dir", "flickr8k_eval_photo_ids"]

NAME = "f8k-full"
FOLDER = "flickr8k-224"
_UNLISTED = ("drop", "train")


def f8kfull_images_dir(root: str | os.PathLike) -> Path:
    return Path(root) / FOLDER / "images"


def _photo_files(root: Path) -> dict[str, Path]:
    d = require_dir(f8kfull_images_dir(root), "Flickr8K 224x224 photo folder", FOLDER)
    out = flickr_photo_files(d)
    if not out:
        raise DataError(f"no photos (*.jpg) in the photo folder; run `polyvse data fetch {FOLDER}`", d)
    return out


def load_f8kfull(
    root: str | os.PathLike, *, dedupe: bool = True, unlisted_split: str = "drop", langs: Iterable[str] | None = None
) -> Corpus:
    """The F8K-full corpus (see the module docstring). Prints nothing; parsed files are cached in-process."""
    root = Path(root)
    if unlisted_split not in _UNLISTED:
        raise DataError(f"unlisted_split must be one of {', '.join(_UNLISTED)}, not {unlisted_split!r}")
    lang_set = {check_language(lang) for lang in langs} if langs is not None else None
    official = official_split(root)
    files = _photo_files(root)
    split = {pid: official.get(pid, unlisted_split) for pid in files}
    per_photo: dict[str, list[Caption]] = {pid: [] for pid in sorted(files) if split[pid] != "drop"}
    wanted = frozenset(per_photo)

    def add(pid: str, lang: str, text: str, source: str) -> None:
        if lang_set is None or lang in lang_set:
            per_photo[pid].append(Caption(pid, lang, text, source, split[pid]))

    with bulk_allocation():
        _collect(root, Flickr8kReader(root, captions="all"), wanted, add)
    captions: list[Caption] = []
    for caps in per_photo.values():
        captions.extend(_dedupe(caps) if dedupe else caps)
    photos = {pid: Photo(pid, files[pid]) for pid in per_photo}
    return Corpus(NAME, photos, captions)


def load_f8kfull_text(
    root: str | os.PathLike,
    *,
    langs: Iterable[str] | None = None,
    drop_eval_texts: bool = True,
    zh_variants: Sequence[str] = TEXT_ONLY_ZH_VARIANTS,
) -> Corpus:
    """The "f8k-full-text" training corpus: all Multi30K, Flickr8K and Flickr8K-CN captions except those of
    every photo an evaluation uses (Flickr8K's val and test photos, Multi30K's test photos: by id) and, with
    `drop_eval_texts`, every sentence an evaluation uses (`polyvse.data.exclusion`: any caption of those
    photos in any source, STS sentences; by caption_key)."""
    exclusion = evaluation_exclusion(root)
    # text-only data keeps its stricter rule too: no sentence ANY source (machine translations included) gives an
    # excluded photo
    corpus = text_only_corpus(
        root,
        exclusion.photo_ids,
        langs,
        zh_variants=zh_variants,
        exclude_texts=None,
        drop_excluded_texts=drop_eval_texts,
        name="f8k-full-text",
    )
    if not drop_eval_texts:
        return corpus
    captions = exclusion.filter_captions(corpus.captions)
    return Corpus(
        corpus.name, {pid: corpus.photos[pid] for pid in dict.fromkeys(c.photo_id for c in captions)}, captions
    )
