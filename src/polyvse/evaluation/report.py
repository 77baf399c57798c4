"""Markdown tables of retrieval results, mean ± std over folds or seeds, and the generated blocks of a Markdown
page: the text between ``<!-- NAME:start -->`` and ``<!-- NAME:end -->``, one definition for every writer (`polyvse
report`, the zoo): what lies between the markers is the renderer's, everything around it the author's."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from numbers import Real
from typing import Any

import numpy as np

#: Default columns: R@1/5/10 and medr both ways, rsum, gallery sizes.
DEFAULT_KEYS: tuple[str, ...] = (
    "i2t_r1",
    "i2t_r5",
    "i2t_r10",
    "i2t_medr",
    "t2i_r1",
    "t2i_r5",
    "t2i_r10",
    "t2i_medr",
    "rsum",
    "n_images",
    "n_captions",
)

_DIRECTIONS = {"i2t": "i2t", "t2i": "t2i", "a2b": "a2b", "b2a": "b2a"}
_STATS = {"r1": "R@1", "r5": "R@5", "r10": "R@10", "medr": "medR", "meanr": "meanR"}
_PLAIN = {"rsum": "rsum", "mr": "mR", "n_images": "images", "n_captions": "captions"}

__all__ = [
    "DEFAULT_KEYS",
    "block_body",
    "block_names",
    "column_label",
    "format_value",
    "markdown_rows",
    "markdown_table",
    "markers",
    "mean_std",
    "mean_std_table",
    "replace_block",
]


def column_label(key: str) -> str:
    """Header for a metric key: ``i2t_r1`` -> ``i2t R@1``, ``n_images`` -> ``images``; unknown keys as is."""
    if key in _PLAIN:
        return _PLAIN[key]
    direction, _, stat = key.partition("_")
    if direction in _DIRECTIONS and stat in _STATS:
        return f"{_DIRECTIONS[direction]} {_STATS[stat]}"
    return key


def _decimals(key: str, value: float) -> int:
    if key.startswith("n_"):
        return 0
    if key.endswith("_medr") and float(value).is_integer():
        return 0
    return 1  # recalls (percent), rsum, mr, meanr, half-integer medians, anything else


def format_value(key: str, value: Any) -> str:
    """One cell: recalls/rsum/mr/meanr with one decimal, counts as integers, integral medr without decimals."""
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, Real):
        return str(value)
    value = float(value)
    if math.isnan(value):
        return "nan"
    return f"{value:.{_decimals(key, value)}f}"


def _escape(text: str) -> str:
    return str(text).replace("|", "\\|")


def markdown_rows(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table of ready-made cells: the first column left-aligned, the others right-aligned; a ``|``
    inside a cell is escaped so that it cannot split the cell."""
    lines = [
        "| " + " | ".join(_escape(h) for h in header) + " |",
        "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|",
    ]
    lines += ["| " + " | ".join(_escape(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def markdown_table(
    results: Mapping[str, Mapping[str, Any]],
    keys: Sequence[str] = DEFAULT_KEYS,
    row_label: str = "language",
) -> str:
    """Markdown table with one row per entry of ``results`` (e.g. language -> metrics dict).

    Columns are ``keys`` (default :data:`DEFAULT_KEYS`); a key missing from a row shows as ``-``.
    Recalls, rsum and mr are printed with one decimal, ``n_images``/``n_captions`` as integers.
    """
    header = [row_label] + [column_label(k) for k in keys]
    rows = [[str(name)] + [format_value(k, m.get(k)) for k in keys] for name, m in results.items()]
    return markdown_rows(header, rows)


def mean_std(runs: Sequence[Mapping[str, Any]]) -> dict[str, tuple[float, float]]:
    """``{key: (mean, std)}`` over metric dicts (folds, seeds, ...).

    Uses the numeric keys of the first dict (non-numeric values such as lists are skipped); every dict
    must have them. ``std`` is the sample standard deviation (ddof=1); with a single dict it is NaN
    (unknown), which :func:`mean_std_table` prints as the mean alone.
    """
    runs = list(runs)
    if not runs:
        raise ValueError("mean_std needs at least one metrics dict")
    keys = [k for k, v in runs[0].items() if isinstance(v, Real) and not isinstance(v, bool)]
    out: dict[str, tuple[float, float]] = {}
    for k in keys:
        missing = [i for i, r in enumerate(runs) if k not in r]
        if missing:
            raise ValueError(f"metric {k!r} is missing from run(s) {missing}")
        vals = np.array([float(r[k]) for r in runs], dtype=np.float64)
        std = float(np.std(vals, ddof=1)) if vals.size > 1 else float("nan")
        out[k] = (float(vals.mean()), std)
    return out


def _format_mean_std(key: str, ms: Any) -> str:
    if ms is None:
        return "-"
    mean, std = ms
    mean, std = float(mean), float(std)
    exact = math.isnan(std) or std == 0
    d = 0 if (key.startswith("n_") or key.endswith("_medr")) and mean.is_integer() and exact else 1
    if math.isnan(std):
        return f"{mean:.{d}f}"
    return f"{mean:.{d}f} ± {std:.{d}f}"


def mean_std_table(
    summaries: Mapping[str, Any],
    keys: Sequence[str] = DEFAULT_KEYS,
    row_label: str = "language",
) -> str:
    """Markdown table of ``mean ± std`` cells, one row per entry of ``summaries``.

    Each value is either a list of metric dicts (summarised with :func:`mean_std`) or an already
    computed ``{key: (mean, std)}`` dict. Means and stds get one decimal (counts: none when constant).
    """
    header = [row_label] + [column_label(k) for k in keys]
    rows = []
    for name, value in summaries.items():
        summary = mean_std(value) if isinstance(value, (list, tuple)) else value
        rows.append([str(name)] + [_format_mean_std(k, summary.get(k)) for k in keys])
    return markdown_rows(header, rows)


# -- generated blocks ---------------------------------------------------------------------------------------------------
_BLOCK = re.compile(r"<!-- (?P<name>[A-Za-z0-9_.-]+):start -->(?P<body>.*?)<!-- (?P=name):end -->", re.S)


def markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}:start -->", f"<!-- {name}:end -->"


def block_names(text: str) -> list[str]:
    """The names of the blocks of ``text``, in order (an unclosed or nested marker is not a block)."""
    return [m.group("name") for m in _BLOCK.finditer(text)]


def block_body(text: str, name: str) -> str | None:
    """What the block ``name`` of ``text`` holds now (None when ``text`` has no such block)."""
    start, end = markers(name)
    if start not in text or end not in text.split(start, 1)[1]:
        return None
    return text.split(start, 1)[1].split(end, 1)[0]


def replace_block(text: str, name: str, body: str) -> str:
    """``text`` with the block ``name`` holding ``body`` (one newline after the start marker and before the end
    marker); a text without the block is returned with it appended."""
    start, end = markers(name)
    inner = "\n" + body.strip("\n") + "\n"
    if block_body(text, name) is None:
        return text.rstrip("\n") + ("\n\n" if text.strip() else "") + start + inner + end + "\n"
    head, rest = text.split(start, 1)
    return head + start + inner + end + rest.split(end, 1)[1]
