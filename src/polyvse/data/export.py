"""Export a corpus as JSON Lines, one caption per line:

    {"image": "1000268201", "lang": "en", "caption": "...", "source": "flickr8k", "split": "test"}

"image" is the photo id (Photo.id): the Flickr id for Flickr/Multi30K corpora, the COCO id for COCO,
the path relative to the images folder for a generic dataset (so an export of a generic dataset can be
read back by the generic reader with the same images folder). Files are written atomically.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import IO

from ..errors import DataError
from ..util.atomic import atomic_open
from .types import Caption, Corpus


def _line(c: Caption) -> str:
    return (
        json.dumps(
            {"image": c.photo_id, "lang": c.lang, "caption": c.text, "source": c.source, "split": c.split},
            ensure_ascii=False,
        )
        + "\n"
    )


def export_jsonl(corpus: Corpus, out: str | os.PathLike | IO[str], split: str | None = None) -> int:
    """Write the captions of `corpus` (only `split`'s when given; None or "all" = every caption) to
    `out`: a path (written atomically), "-" for standard output, or an open text stream. Returns the
    number of lines written. Asking for a split the corpus does not have is an error."""
    if split in (None, "", "all"):
        caps = corpus.captions
    else:
        caps = [c for c in corpus.captions if c.split == split]
        if not caps:
            present = sorted({c.split or '""' for c in corpus.captions})
            raise DataError(
                f"corpus {corpus.name!r} has no captions in split {split!r}; its splits: {', '.join(present) or 'none'}"
            )
    if hasattr(out, "write"):
        for c in caps:
            out.write(_line(c))  # type: ignore[union-attr]
        return len(caps)
    if str(out) == "-":
        write = sys.stdout.write
        for c in caps:
            write(_line(c))
        sys.stdout.flush()
        return len(caps)
    path = Path(out)
    if path.is_dir():
        raise DataError("output is a folder; give a file name", path)
    with atomic_open(path, "w") as fh:
        for c in caps:
            fh.write(_line(c))
    return len(caps)
