"""MultiScript30k (github ufdatastudio/multi30k-extension, Driggers-Ellis et al. 2025): machine translations of
Multi30K task1's English lines into new languages, under ``<root>/multiscript30k/``.

Layout: ``en-<folder>/{train,val,test_2016_flickr}.<folder>.gz``; line i translates line i of
``multi30k/data/task1/raw/<split>.en.gz`` and so describes image line i of
``multi30k/data/task1/image_splits/<split>.txt``, exactly as Multi30K's own de/fr/cs lines do.

Folders and the ISO 639-1 code polyvse gives their captions: ``es`` Spanish, ``ar_arab`` Arabic (ar), ``zh_hans``
Simplified Chinese (zh), ``qu`` Quechua, ``gn`` Guarani. Quechua and Guarani have no ``test_2016_flickr`` file
(the source's 999 lines for 1,000 photos leave their alignment unknown). Empty lines are empty on purpose
(photos kept aside elsewhere): they are skipped. Captions have source ``multiscript30k`` so that the machine-
translated Chinese lines are never mistaken for Flickr8K-CN's native ones; every figure that uses them must say
they are machine translations.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from ..errors import DataError
from ._io import read_lines, require_file
from .multi30k import _SPLIT_NAMES, TASK1_SPLITS, image_list_path, multi30k_dir

__all__ = ["FOLDERS", "LANGUAGES", "SOURCE", "MultiScript30kReader", "multiscript30k_dir", "relative_files"]

FOLDER = "multiscript30k"
SOURCE = "multiscript30k"
#: ISO 639-1 code -> folder suffix in the corpus
FOLDERS: dict[str, str] = {"es": "es", "ar": "ar_arab", "zh": "zh_hans", "qu": "qu", "gn": "gn"}
LANGUAGES: tuple[str, ...] = tuple(FOLDERS)
#: splits the corpus lacks for a language
MISSING_SPLITS: dict[str, frozenset[str]] = {
    "qu": frozenset({"test_2016_flickr"}),
    "gn": frozenset({"test_2016_flickr"}),
}


def multiscript30k_dir(root: str | os.PathLike) -> Path:
    return Path(root) / FOLDER


def relative_files() -> list[str]:
    """Every file of the corpus, relative to the data root (what `polyvse data fetch` copies)."""
    return [
        f"{FOLDER}/en-{folder}/{split}.{folder}.gz"
        for lang, folder in FOLDERS.items()
        for split in TASK1_SPLITS
        if split not in MISSING_SPLITS.get(lang, ())
    ]


class Line(NamedTuple):
    photo_id: str
    lang: str
    text: str
    split: str  # polyvse split name: train, val, test
    line: int  # 1-based line number in the file


class MultiScript30kReader:
    """Aligned lines of one language and Multi30K task1 split."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    def path(self, lang: str, split: str) -> Path:
        if lang not in FOLDERS:
            raise DataError(f"multiscript30k has no language {lang!r}; it has {', '.join(LANGUAGES)}")
        if split not in TASK1_SPLITS:
            raise DataError(f"multiscript30k split {split!r}: use one of {', '.join(TASK1_SPLITS)}")
        folder = FOLDERS[lang]
        return multiscript30k_dir(self.root) / f"en-{folder}" / f"{split}.{folder}.gz"

    def has(self, lang: str, split: str) -> bool:
        return split not in MISSING_SPLITS.get(lang, ()) and self.path(lang, split).is_file()

    def lines(self, lang: str, split: str) -> list[Line]:
        """The non-empty lines of `lang` in Multi30K task1 split `split`, with their photo ids."""
        if split in MISSING_SPLITS.get(lang, ()):
            raise DataError(f"multiscript30k has no {split} file for {lang!r} (its alignment is unknown)")
        path = require_file(self.path(lang, split), f"MultiScript30k {lang} {split} lines", FOLDER)
        list_path = require_file(image_list_path(self.root, "task1", split), "Multi30K task1 image list", "multi30k")
        images = read_lines(list_path)
        texts = read_lines(path)
        if len(texts) != len(images):
            raise DataError(
                f"{len(texts)} lines for {len(images)} images of {list_path.name}: the file is not "
                "aligned with Multi30K task1; fetch the corpus again (`polyvse data fetch multiscript30k`)",
                path,
            )
        out = []
        for i, (image, text) in enumerate(zip(images, texts)):
            text = text.strip()
            if text:
                out.append(Line(image.strip().rsplit(".", 1)[0], lang, text, _SPLIT_NAMES[split], i + 1))
        return out

    def all_lines(self, langs: Iterable[str] = LANGUAGES) -> list[Line]:
        """Every available line of `langs`, every split."""
        return [
            ln for lang in langs for split in TASK1_SPLITS if self.has(lang, split) for ln in self.lines(lang, split)
        ]


def check_multi30k_present(root: str | os.PathLike) -> None:
    if not multi30k_dir(root).is_dir():
        raise DataError(
            "MultiScript30k lines are aligned through Multi30K's image lists: run `polyvse data fetch multi30k` first",
            multi30k_dir(root),
        )
