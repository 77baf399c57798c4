"""Multi30K (github multi30k/dataset) reader: task1 (en + de/fr/cs translations) and task2 (5 en + 5 de
independent captions per image), under `<root>/multi30k/data/`.

Layout (as in the public repository):
  task1/image_splits/{train,val,test_2016_flickr}.txt   one image name (`<flickr_id>.jpg`) per line
  task1/raw/{split}.{en,de,fr,cs}.gz                     line i describes image line i
  task2/image_splits/{train,val,test_2016}_images.txt
  task2/raw/{split}.{1..5}.{en,de}.gz

Photo ids are Flickr ids (the image name without ".jpg"). The Flickr30K photos are not distributed
with the corpus, so photos have path None unless `images_dir` is given and holds `<id>.jpg`.
Caption.split is Multi30K's own split ("train", "val", "test" for the 2016 test set; other test sets
keep their name, e.g. "test_2017_flickr").
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

from ..errors import DataError
from ..languages import check_language
from ._io import cached_keys, read_lines, require_file, stat_key
from .types import Caption, Corpus, Photo

TASK1_SPLITS = ("train", "val", "test_2016_flickr")
TASK2_SPLITS = ("train", "val", "test_2016")
TASK1_LANGS = ("en", "de", "fr", "cs")
TASK2_LANGS = ("en", "de")
TASK2_CAPTIONS_PER_IMAGE = 5
SOURCES = {"task1": "multi30k-task1", "task2": "multi30k-task2"}
_SPLIT_NAMES = {"train": "train", "val": "val", "test_2016_flickr": "test", "test_2016": "test"}


class AlignedFile(NamedTuple):
    """One Multi30K caption file, aligned with its image list: pairs[i] = (photo_id, caption)."""

    source: str
    split: str  # polyvse split name
    lang: str
    path: Path
    list_path: Path
    pairs: tuple[tuple[str, str], ...]

    def keys(self) -> tuple[str, ...]:
        """caption_key of each caption (cached in-process with the file)."""
        return cached_keys(
            ("multi30k", stat_key(self.list_path), stat_key(self.path)), lambda: (t for _, t in self.pairs)
        )


class Multi30kRecord(NamedTuple):
    photo_id: str
    lang: str
    text: str
    source: str
    split: str  # polyvse split name


def multi30k_dir(root: str | os.PathLike) -> Path:
    return Path(root) / "multi30k" / "data"


def image_list_path(root, task: str, split: str) -> Path:
    base = multi30k_dir(root) / task / "image_splits"
    return base / (f"{split}.txt" if task == "task1" else f"{split}_images.txt")


def caption_file_paths(root, task: str, split: str, lang: str) -> list[Path]:
    raw = multi30k_dir(root) / task / "raw"
    if task == "task1":
        return [raw / f"{split}.{lang}.gz"]
    return [raw / f"{split}.{k}.{lang}.gz" for k in range(1, TASK2_CAPTIONS_PER_IMAGE + 1)]


def relative_files() -> list[str]:
    """Every file of the default Multi30K selection, relative to the data root (used by fetch)."""
    root = Path("")
    out = []
    for task, splits, langs in (("task1", TASK1_SPLITS, TASK1_LANGS), ("task2", TASK2_SPLITS, TASK2_LANGS)):
        for split in splits:
            out.append(image_list_path(root, task, split).as_posix())
            for lang in langs:
                out.extend(p.as_posix() for p in caption_file_paths(root, task, split, lang))
    return out


def _split_name(split: str) -> str:
    return _SPLIT_NAMES.get(split, split)


def _image_ids(path: Path) -> tuple[str, ...]:
    ids = []
    for i, name in enumerate(read_lines(path), 1):
        name = name.strip()
        if not name:
            raise DataError("empty line in an image list; re-fetch with `polyvse data fetch multi30k`", path, i)
        ids.append(name[:-4] if name.lower().endswith(".jpg") else name)
    return tuple(ids)


def _aligned(list_path: Path, path: Path) -> tuple[tuple[str, str], ...]:
    return _aligned_cached(stat_key(list_path), stat_key(path))


@functools.lru_cache(maxsize=128)
def _aligned_cached(list_key, file_key) -> tuple[tuple[str, str], ...]:
    list_path, path = Path(list_key[0]), Path(file_key[0])
    ids = _image_ids(list_path)
    lines = read_lines(path)
    if len(lines) != len(ids):
        raise DataError(
            f"{len(lines)} caption lines but {len(ids)} images in {list_path.name}: the files are "
            "not aligned; re-fetch with `polyvse data fetch multi30k`",
            path,
        )
    out = []
    for i, (pid, text) in enumerate(zip(ids, lines), 1):
        text = text.strip()
        if not text:
            raise DataError("empty caption; re-fetch with `polyvse data fetch multi30k`", path, i)
        out.append((pid, text))
    return tuple(out)


class Multi30kReader:
    """Reads Multi30K task1/task2 captions into a Corpus (one Photo per image, path None)."""

    def __init__(
        self,
        root: str | os.PathLike,
        *,
        tasks: Iterable[str] = ("task1", "task2"),
        splits: Iterable[str] | None = None,
        langs: Iterable[str] | None = None,
        images_dir: str | os.PathLike | None = None,
    ):
        self.root = Path(root)
        self.tasks = tuple(tasks)
        for t in self.tasks:
            if t not in SOURCES:
                raise DataError(f"unknown Multi30K task {t!r}; use task1 and/or task2")
        self.splits = tuple(splits) if splits is not None else None
        self.langs = tuple(check_language(lang) for lang in langs) if langs is not None else None
        self.images_dir = Path(images_dir) if images_dir is not None else None

    def _task_splits(self, task: str) -> tuple[str, ...]:
        default = TASK1_SPLITS if task == "task1" else TASK2_SPLITS
        if self.splits is None:
            return default
        # accept polyvse names ("test") as well as Multi30K's ("test_2016_flickr")
        wanted = []
        for s in self.splits:
            if s == "test":
                wanted.append(default[2])
            else:
                wanted.append(s)
        return tuple(dict.fromkeys(wanted))

    def _task_langs(self, task: str) -> tuple[str, ...]:
        avail = TASK1_LANGS if task == "task1" else TASK2_LANGS
        return avail if self.langs is None else tuple(lang for lang in avail if lang in self.langs)

    def images(self, task: str, split: str) -> tuple[str, ...]:
        """Photo ids of one task/split, in file order."""
        path = require_file(image_list_path(self.root, task, split), f"Multi30K {task} {split} image list", "multi30k")
        return _image_ids(path)

    def files(self) -> Iterator[AlignedFile]:
        """One AlignedFile (source, polyvse split, lang, path, list_path, ((photo_id, text), ...)) per
        caption file, validated: one line per image, no empty caption. Parsed files are cached
        in-process."""
        for task in self.tasks:
            source = SOURCES[task]
            for split in self._task_splits(task):
                list_path = require_file(
                    image_list_path(self.root, task, split), f"Multi30K {task} {split} image list", "multi30k"
                )
                pol_split = _split_name(split)
                for lang in self._task_langs(task):
                    for path in caption_file_paths(self.root, task, split, lang):
                        require_file(path, f"Multi30K {task} {split} {lang} captions", "multi30k")
                        yield AlignedFile(source, pol_split, lang, path, list_path, _aligned(list_path, path))

    def records(
        self, *, only: set[str] | frozenset[str] | None = None, exclude: set[str] | frozenset[str] | None = None
    ) -> Iterator[Multi30kRecord]:
        """(photo_id, lang, text, source, split) for every caption, file by file (task1 then task2),
        optionally only for photo ids in `only` and not in `exclude`."""
        for f in self.files():
            for pid, text in f.pairs:
                if (only is None or pid in only) and (exclude is None or pid not in exclude):
                    yield Multi30kRecord(pid, f.lang, text, f.source, f.split)

    def read(self) -> Corpus:
        corpus = Corpus("multi30k")
        photos = corpus.photos
        for rec in self.records():
            if rec.photo_id not in photos:
                path = None
                if self.images_dir is not None:
                    candidate = self.images_dir / f"{rec.photo_id}.jpg"
                    path = candidate.resolve() if candidate.is_file() else None
                photos[rec.photo_id] = Photo(rec.photo_id, path)
            corpus.captions.append(Caption(rec.photo_id, rec.lang, rec.text, rec.source, rec.split))
        return corpus


def multi30k_test_photo_ids(root: str | os.PathLike) -> set[str]:
    """Photos of Multi30K's test sets (task1 test_2016_flickr, task2 test_2016): evaluation photos of the
    cross-lingual caption retrieval, so never text-side training data."""
    reader = Multi30kReader(root)
    return set(reader.images("task1", TASK1_SPLITS[2])) | set(reader.images("task2", TASK2_SPLITS[2]))


def load_multi30k(root, **opts) -> Corpus:
    return Multi30kReader(root, **opts).read()
