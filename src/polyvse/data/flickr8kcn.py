"""Flickr8K-CN (github li-xirong/flickr8kcn) reader, under `<root>/flickr8kcn/data/`.

Caption files have one caption per line: `<image>.jpg#<variant>#<k> <sentence>`. Variants:
  zhc  Chinese written by native speakers, all photos          source "flickr8kcn-zhc"
  zhb  machine translation (Baidu) of the English captions      source "flickr8kcn-zhb"
  zhg  machine translation (Google) of the English captions     source "flickr8kcn-zhg"
  zhm  human translation, Flickr8K test photos only             source "flickr8kcn-zhm"
  enc  the original English captions                           source "flickr8kcn-enc" (lang en)
The standard Flickr8K split is in flickr8k{train,val,test}.txt (image names without ".jpg").

Photo ids are Flickr ids (numeric prefix of the image name). The zhb/zhg/enc files also hold a
quirk of the original Flickr8K token file, `2258277193_586949ec62.jpg.1`: it is read as photo
"2258277193" (a photo outside the official split and outside the 8091-photo caption CSV).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import NamedTuple

from ..errors import DataError
from ._io import cached_keys, flickr_id, read_lines, require_file, stat_key
from .types import Caption, Corpus, Photo

VARIANTS: dict[str, tuple[str, str, str]] = {
    # variant: (file name, lang, source)
    "zhc": ("flickr8kzhc.caption.txt", "zh", "flickr8kcn-zhc"),
    "zhb": ("flickr8kzhb.caption.txt", "zh", "flickr8kcn-zhb"),
    "zhg": ("flickr8kzhg.caption.txt", "zh", "flickr8kcn-zhg"),
    "zhm": ("flickr8kzhmtest.captions.txt", "zh", "flickr8kcn-zhm"),
    "enc": ("flickr8kenc.caption.txt", "en", "flickr8kcn-enc"),
}
SPLIT_FILES = {"train": "flickr8ktrain.txt", "val": "flickr8kval.txt", "test": "flickr8ktest.txt"}


def flickr8kcn_dir(root: str | os.PathLike) -> Path:
    return Path(root) / "flickr8kcn" / "data"


def relative_files() -> list[str]:
    """Files of Flickr8K-CN relative to the data root (used by fetch)."""
    names = [v[0] for v in VARIANTS.values()] + list(SPLIT_FILES.values())
    return ["flickr8kcn/README.md"] + [f"flickr8kcn/data/{n}" for n in names]


def official_split(root: str | os.PathLike) -> dict[str, str]:
    """Flickr photo id -> "train" / "val" / "test" under the standard Flickr8K split (6000/1000/1000)."""
    out: dict[str, str] = {}
    base = flickr8kcn_dir(root)
    for split, name in SPLIT_FILES.items():
        path = require_file(base / name, f"Flickr8K {split} split list", "flickr8kcn")
        for i, line in enumerate(read_lines(path), 1):
            name_ = line.strip()
            if not name_:
                continue
            pid = flickr_id(name_)
            if pid in out and out[pid] != split:
                raise DataError(
                    f"photo {pid} is in both the {out[pid]} and the {split} split lists; "
                    "re-fetch with `polyvse data fetch flickr8kcn`",
                    path,
                    i,
                )
            out[pid] = split
    return out


class Flickr8kCnRecord(NamedTuple):
    line: int
    image: str
    photo_id: str
    lang: str
    text: str
    source: str


def parse_caption_file(path: Path, variant: str) -> tuple[Flickr8kCnRecord, ...]:
    """All captions of one Flickr8K-CN file (cached in-process by path + mtime + size)."""
    return _parse_cached(stat_key(Path(path)), variant)


@functools.lru_cache(maxsize=32)
def _parse_cached(key, variant: str) -> tuple[Flickr8kCnRecord, ...]:
    path = Path(key[0])
    _, lang, source = VARIANTS[variant]
    out: list[Flickr8kCnRecord] = []
    for i, line in enumerate(read_lines(path), 1):
        if not line.strip():
            continue
        key, sep, text = line.partition(" ")
        parts = key.split("#")
        text = text.strip()
        if not sep or len(parts) != 3 or not parts[0] or not text:
            raise DataError(
                f"expected `<image>.jpg#{variant}#<k> <sentence>`, got {line[:60]!r}; "
                "re-fetch with `polyvse data fetch flickr8kcn`",
                path,
                i,
            )
        image = parts[0]
        out.append(Flickr8kCnRecord(i, image, flickr_id(image), lang, text, source))
    return tuple(out)


class Flickr8kCnReader:
    """Reads chosen Flickr8K-CN variants. Photo paths point into `<root>/flickr8k/images` where a
    photo file is at hand, else None. Caption.split comes from `splits` (photo id -> split; pass
    official_split(root) for the standard split) or is ""."""

    def __init__(
        self, root: str | os.PathLike, *, variants: Iterable[str] = ("zhc",), splits: Mapping[str, str] | None = None
    ):
        self.root = Path(root)
        self.variants = tuple(variants)
        for v in self.variants:
            if v not in VARIANTS:
                raise DataError(f"unknown Flickr8K-CN variant {v!r}; known: {', '.join(VARIANTS)}")
        self.splits = splits

    def records(self, *variants: str) -> Iterator[Flickr8kCnRecord]:
        """Records of the given variants (default: the reader's), file by file."""
        base = flickr8kcn_dir(self.root)
        for v in variants or self.variants:
            if v not in VARIANTS:
                raise DataError(f"unknown Flickr8K-CN variant {v!r}; known: {', '.join(VARIANTS)}")
            path = require_file(base / VARIANTS[v][0], f"Flickr8K-CN {v} captions", "flickr8kcn")
            yield from parse_caption_file(path, v)

    def caption_keys(self, variant: str) -> tuple[str, ...]:
        """caption_key of each caption of one variant, in file order (cached in-process)."""
        path = require_file(
            flickr8kcn_dir(self.root) / VARIANTS[variant][0], f"Flickr8K-CN {variant} captions", "flickr8kcn"
        )
        return cached_keys(
            ("flickr8kcn", stat_key(path), variant), lambda: (r.text for r in parse_caption_file(path, variant))
        )

    def read(self) -> Corpus:
        images = self.root / "flickr8k" / "images"
        files: dict[str, Path] = {}
        if images.is_dir():
            files = {flickr_id(p.name): p.resolve() for p in images.iterdir() if p.suffix.lower() == ".jpg"}
        splits = self.splits or {}
        corpus = Corpus("flickr8kcn")
        for r in self.records():
            if r.photo_id not in corpus.photos:
                corpus.photos[r.photo_id] = Photo(r.photo_id, files.get(r.photo_id))
            corpus.captions.append(Caption(r.photo_id, r.lang, r.text, r.source, splits.get(r.photo_id, "")))
        return corpus
