"""SemEval STS (semantic textual similarity) test sets, under `<root>/sts/`.

Layout (as SemEval distributes them)::

    STS12-en-test/STS.input.MSRvid.txt   STS12-en-test/STS.gs.MSRvid.txt
    STS14-en-test/STS.input.images.txt   STS14-en-test/STS.gs.images.txt
    STS15-en-test/STS.input.images.txt   STS15-en-test/STS.gs.images.txt

`STS.input.<name>.txt`: one sentence pair per line, the two sentences separated by one tab.
`STS.gs.<name>.txt`: the gold similarity of the pair on the same line, a number in [0, 5].

A gold line may be empty: SemEval 2015 released every input pair but scored only the annotated
ones (in STS15 images, 750 of the 1500 lines have a gold score). Pairs without a gold score are
skipped, as the official scorer does. Everything else that is off (a line with no tab or more than
one, an empty sentence, a gold value that is not a number in [0, 5], files of different lengths)
raises :class:`polyvse.errors.DataError` naming the file and line.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import DataError
from ._io import read_lines, require_dir, require_file

__all__ = ["STS_SETS", "StsSet", "read_sts", "load_sts", "sts_dir"]

#: The STS sets Gella et al. and Calixto & Liu report: name -> (folder, file infix).
STS_SETS: dict[str, tuple[str, str]] = {
    "sts12-msrvid": ("STS12-en-test", "MSRvid"),
    "sts14-images": ("STS14-en-test", "images"),
    "sts15-images": ("STS15-en-test", "images"),
}

GOLD_MIN, GOLD_MAX = 0.0, 5.0


@dataclass(frozen=True)
class StsSet:
    """The scored pairs of one STS test set, in file order.

    pairs: ((sentence1, sentence2), ...) for every line that has a gold score
    gold:  (n,) float64 gold similarity in [0, 5], aligned with ``pairs``
    lines: 1-based line number of each pair in the input (and gold) file
    n_unscored: input lines skipped because their gold line is empty
    """

    name: str
    input_path: Path
    gold_path: Path
    pairs: tuple[tuple[str, str], ...]
    gold: np.ndarray
    lines: tuple[int, ...]
    n_unscored: int

    def __len__(self) -> int:
        return len(self.pairs)


def _parse_gold(raw: str, path: Path, line: int) -> float | None:
    text = raw.strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise DataError(
            f"gold score {text[:40]!r} is not a number; expected a value in [0, 5] or an empty line (unscored pair)",
            path,
            line,
        ) from None
    if not math.isfinite(value) or not GOLD_MIN <= value <= GOLD_MAX:
        raise DataError(f"gold score {value} is outside [0, 5]", path, line)
    return value


def _parse_pair(raw: str, path: Path, line: int) -> tuple[str, str]:
    fields = raw.split("\t")
    if len(fields) != 2:
        raise DataError(
            f"expected two sentences separated by one tab, found {len(fields)} field(s) in {raw[:60]!r}", path, line
        )
    a, b = fields[0].strip(), fields[1].strip()
    if not a or not b:
        which = "first" if not a else "second"
        raise DataError(f"the {which} sentence of the pair is empty", path, line)
    return a, b


def read_sts(input_path: str | os.PathLike, gold_path: str | os.PathLike, name: str | None = None) -> StsSet:
    """Read one STS input file and its gold file (line i of one belongs to line i of the other).

    Lines whose gold is empty are skipped (their input line is still checked). Errors name file:line.
    """
    input_path, gold_path = Path(input_path), Path(gold_path)
    require_file(input_path, "STS input file", None)
    require_file(gold_path, "STS gold-standard file", None)
    inputs = read_lines(input_path)
    golds = read_lines(gold_path)
    if len(inputs) != len(golds):
        raise DataError(
            f"{len(inputs)} sentence pairs but {len(golds)} gold lines in {gold_path}; the two "
            "files must have one line per pair each",
            input_path,
        )
    if not inputs:
        raise DataError("no sentence pairs in the file", input_path)
    pairs, gold, lines = [], [], []
    skipped = 0
    for i, (raw_pair, raw_gold) in enumerate(zip(inputs, golds), 1):
        pair = _parse_pair(raw_pair, input_path, i)
        value = _parse_gold(raw_gold, gold_path, i)
        if value is None:
            skipped += 1
            continue
        pairs.append(pair)
        gold.append(value)
        lines.append(i)
    if not pairs:
        raise DataError("every gold line is empty: no scored pair to evaluate", gold_path)
    return StsSet(
        name or input_path.stem.replace("STS.input.", ""),
        input_path,
        gold_path,
        tuple(pairs),
        np.asarray(gold, dtype=np.float64),
        tuple(lines),
        skipped,
    )


def sts_dir(root: str | os.PathLike) -> Path:
    """The STS folder: `<root>/sts`, or `root` itself when it already holds the STS1x-en-test folders."""
    root = Path(root)
    if (root / "sts").is_dir():
        return root / "sts"
    if any((root / folder).is_dir() for folder, _ in STS_SETS.values()):
        return root
    return require_dir(root / "sts", "STS data folder (STS12-en-test, STS14-en-test, STS15-en-test)", None)


def load_sts(root: str | os.PathLike, name: str) -> StsSet:
    """One of :data:`STS_SETS` by name (e.g. "sts14-images") from the data root."""
    if name not in STS_SETS:
        raise DataError(f"unknown STS set {name!r}; known: {', '.join(STS_SETS)}")
    folder, infix = STS_SETS[name]
    base = sts_dir(root) / folder
    return read_sts(base / f"STS.input.{infix}.txt", base / f"STS.gs.{infix}.txt", name=name)
