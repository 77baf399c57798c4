"""Flickr8K reader (photos + English captions) under `<root>/flickr8k/`.

  images/            photos named `<flickr_id>_<secret>.jpg`
  captions.txt       CSV with header `image,caption`: the captions of the photos in images/
  all_captions.txt   the same CSV for all 8091 Flickr8K photos (most photo files not at hand)

Photo.id is the numeric Flickr id ("1000268201"), Photo.path the absolute path of the file (None
when the file is not at hand). Caption source "flickr8k", lang "en". Caption.split comes from the
`splits` mapping (photo id -> split) when given, else "".
"""

from __future__ import annotations

import csv
import functools
import os
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from ..errors import DataError
from ._io import cached_keys, flickr_id, read_lines, require_dir, require_file, stat_key
from .types import Caption, Corpus, Photo

SOURCE = "flickr8k"
PHOTO_CAPTIONS = "captions.txt"
ALL_CAPTIONS = "all_captions.txt"


def flickr_photo_files(d: Path) -> dict[str, Path]:
    """Flickr id -> absolute path of every `*.jpg` in folder `d` (sorted by name); two files of one id
    are an error naming both."""
    out: dict[str, Path] = {}
    for p in sorted(d.iterdir()):
        if p.suffix.lower() == ".jpg" and p.is_file():
            pid = flickr_id(p.name)
            if pid in out:
                raise DataError(f"two photo files share Flickr id {pid} ({out[pid].name}, {p.name}); remove one", p)
            out[pid] = p.resolve()
    return out


def flickr8k_dir(root: str | os.PathLike) -> Path:
    return Path(root) / "flickr8k"


class Flickr8kRow(NamedTuple):
    line: int
    image: str  # file name as in the CSV
    photo_id: str
    text: str


def read_captions_csv(path: Path) -> tuple[Flickr8kRow, ...]:
    """Parse a Flickr8K `image,caption` CSV; errors name the file and line. Cached in-process."""
    return _csv_cached(stat_key(Path(path)))


@functools.lru_cache(maxsize=16)
def _csv_cached(key) -> tuple[Flickr8kRow, ...]:
    path = Path(key[0])
    lines = read_lines(path)
    if not lines:
        raise DataError("empty file; expected a header `image,caption`", path, 1)
    rows: list[Flickr8kRow] = []
    reader = csv.reader(lines)
    header = next(reader)
    if [h.strip().lower() for h in header] != ["image", "caption"]:
        raise DataError(f"header is {','.join(header)!r}, expected 'image,caption'", path, 1)
    start = 2
    for fields in reader:
        line = start
        start = reader.line_num + 1
        if not fields or (len(fields) == 1 and not fields[0].strip()):
            continue
        if len(fields) != 2:
            raise DataError(
                f"expected 2 fields (image,caption), found {len(fields)}; re-fetch with `polyvse data fetch flickr8k`",
                path,
                line,
            )
        image, text = fields[0].strip(), fields[1].strip()
        if not image or not text:
            raise DataError("empty image name or caption; re-fetch with `polyvse data fetch flickr8k`", path, line)
        rows.append(Flickr8kRow(line, image, flickr_id(image), text))
    return tuple(rows)


class Flickr8kReader:
    """captions="photos": the photos in images/ with captions.txt (every caption's photo must exist).
    captions="all": all_captions.txt (all Flickr8K photos; path set only where the file exists)."""

    def __init__(self, root: str | os.PathLike, *, captions: str = "photos", splits: Mapping[str, str] | None = None):
        if captions not in ("photos", "all"):
            raise DataError(f"captions must be 'photos' or 'all', not {captions!r}")
        self.root = Path(root)
        self.captions = captions
        self.splits = splits

    @property
    def images_dir(self) -> Path:
        return flickr8k_dir(self.root) / "images"

    @property
    def captions_path(self) -> Path:
        return flickr8k_dir(self.root) / (PHOTO_CAPTIONS if self.captions == "photos" else ALL_CAPTIONS)

    def photo_files(self) -> dict[str, Path]:
        """photo id -> absolute path of every `*.jpg` in images/ (sorted by name)."""
        return flickr_photo_files(require_dir(self.images_dir, "Flickr8K photo folder", "flickr8k"))

    def rows(self) -> tuple[Flickr8kRow, ...]:
        path = require_file(self.captions_path, "Flickr8K captions", "flickr8k")
        return read_captions_csv(path)

    def caption_keys(self) -> tuple[str, ...]:
        """caption_key of each row's caption, in row order (cached in-process with the file)."""
        path = require_file(self.captions_path, "Flickr8K captions", "flickr8k")
        return cached_keys(("flickr8k", stat_key(path)), lambda: (r.text for r in self.rows()))

    def read(self) -> Corpus:
        rows = self.rows()
        files = self.photo_files() if (self.captions == "photos" or self.images_dir.is_dir()) else {}
        corpus = Corpus("flickr8k" if self.captions == "photos" else "flickr8k-all")
        splits = self.splits or {}
        for r in rows:
            path = files.get(r.photo_id)
            if path is None and self.captions == "photos":
                raise DataError(
                    f"photo file {r.image} is not in {self.images_dir}; re-fetch with `polyvse data fetch flickr8k`",
                    self.captions_path,
                    r.line,
                )
            if r.photo_id not in corpus.photos:
                corpus.photos[r.photo_id] = Photo(r.photo_id, path)
            corpus.captions.append(Caption(r.photo_id, "en", r.text, SOURCE, splits.get(r.photo_id, "")))
        return corpus
