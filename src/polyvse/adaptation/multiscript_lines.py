"""Parallel files from the Multi30K extension (MultiScript30k): a new language's machine-translated lines with the
Multi30K task1 line of the same photo in the pivot language, and no evaluation photo or sentence in them.

    polyvse data parallel --lang qu --pivot en --lines 1000 --out qu-en.tsv

Line i of ``multiscript30k/en-<code>/<split>.<code>.gz`` and line i of ``multi30k/data/task1/raw/<split>.<pivot>.gz``
describe the same photo (line i of the split's image list), so they pair up line by line; empty lines (photos kept
aside on purpose) are skipped. ``polyvse.data.exclusion.evaluation_exclusion`` decides what may not train: a pair is
dropped when its photo is an evaluation photo (Flickr8K val/test, Multi30K test) or either of its sentences is a
sentence of one. The kept pairs are shuffled with a fixed seed and the first ``lines`` written, so the files of a
learning curve are nested (the 100 lines are the first 100 of the 1,000).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..errors import DataError
from .parallel_file import write_parallel_file

__all__ = ["multiscript_pairs", "write_multiscript_parallel", "PIVOT_SOURCES"]

#: pivot languages with a line-aligned task1 file in Multi30K
PIVOT_SOURCES = ("en", "de", "fr", "cs")
DEFAULT_SPLITS = ("train",)


def multiscript_pairs(
    root: str | os.PathLike, lang: str, pivot_lang: str = "en", splits=DEFAULT_SPLITS, exclusion=None
) -> list[tuple[str, str, str]]:
    """``(text, pivot_text, photo_id)`` of every usable line pair, in file order; ``exclusion``: an
    ``EvaluationExclusion`` (default: every evaluation photo and sentence polyvse knows). ``lang`` is a MultiScript30k
    language, or one of Multi30K's own (de, fr, cs, en: its human task1 lines, aligned with the pivot's the same way)."""
    from ..data._io import read_lines
    from ..data.exclusion import evaluation_exclusion
    from ..data.multi30k import caption_file_paths, image_list_path
    from ..data.multiscript30k import MultiScript30kReader

    def multi30k_lines(split: str) -> list[tuple[int, str, str]]:
        path = caption_file_paths(root, "task1", split, lang)[0]
        if not path.is_file():
            raise DataError(f"no Multi30K task1 {lang} lines for {split}; run `polyvse data fetch multi30k`", path)
        photos = [x.strip().rsplit(".", 1)[0] for x in read_lines(image_list_path(root, "task1", split))]
        return [(i + 1, t.strip(), p) for i, (p, t) in enumerate(zip(photos, read_lines(path))) if t.strip()]

    def multiscript_lines(split: str) -> list[tuple[int, str, str]]:
        return [(x.line, x.text, x.photo_id) for x in reader.lines(lang, split)]

    if pivot_lang not in PIVOT_SOURCES:
        raise DataError(f"pivot {pivot_lang!r}: Multi30K task1 has line-aligned files in {', '.join(PIVOT_SOURCES)}")
    exclusion = evaluation_exclusion(root) if exclusion is None else exclusion
    reader = None if lang in PIVOT_SOURCES else MultiScript30kReader(root)
    out = []
    for split in splits:
        pivot_path = caption_file_paths(root, "task1", split, pivot_lang)[0]
        if not pivot_path.is_file():
            raise DataError(
                f"no Multi30K task1 {pivot_lang} lines for {split}; run `polyvse data fetch multi30k`", pivot_path
            )
        pivot_lines = read_lines(pivot_path)
        for line, text, photo in (multi30k_lines if lang in PIVOT_SOURCES else multiscript_lines)(split):
            pivot_text = pivot_lines[line - 1].strip()
            if not pivot_text or exclusion.excludes(photo, text) or exclusion.excludes(photo, pivot_text):
                continue
            out.append((text, pivot_text, photo))
    return out


def write_multiscript_parallel(
    root: str | os.PathLike,
    lang: str,
    out: str | os.PathLike,
    pivot_lang: str = "en",
    lines: int | None = None,
    splits=DEFAULT_SPLITS,
    seed: int = 0,
    exclusion=None,
) -> dict:
    """Write the parallel file (TSV or JSONL by the name, ``parallel_file``); returns a summary."""
    pairs = multiscript_pairs(root, lang, pivot_lang, splits, exclusion)
    if not pairs:
        raise DataError(
            f"no {lang}-{pivot_lang} line pair outside the evaluations in multiscript30k {', '.join(splits)}"
        )
    order = np.random.default_rng(seed).permutation(len(pairs))
    chosen = [pairs[i] for i in order[: lines if lines is not None else len(pairs)]]
    write_parallel_file(out, [(a, b) for a, b, _ in chosen], lang, pivot_lang)
    return {
        "file": str(Path(out)),
        "lang": lang,
        "pivot_lang": pivot_lang,
        "splits": list(splits),
        "available": len(pairs),
        "written": len(chosen),
        "seed": seed,
    }
