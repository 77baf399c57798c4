"""A parallel file: sentences in a new language, each with its counterpart in a language the model knows.

Two formats, chosen by the file name (``.gz`` on top of either is read too):

``*.jsonl`` -- one JSON object a line::

    {"text": "Huk allqo pampapi phawashan", "pivot_text": "A dog runs on the grass", "pivot_lang": "en"}

  ``text`` the sentence in the new language, ``pivot_text`` its counterpart, ``pivot_lang`` the counterpart's
  language (optional: the caller's default, ``--pivot-lang``, else ``en``). Other keys are ignored.

anything else (``*.tsv``, ``*.txt``) -- ``new<TAB>known`` a line, the counterpart in the default pivot language.
  The first line may be a header: exactly two fields, each a language code or a column name (``text``,
  ``pivot_text``, ``new``, ``known``), e.g. ``qu<TAB>en``; a header ``<code><TAB><code>`` also names the pivot.

Lines that are empty (or only white space) are skipped: line-aligned corpora leave lines empty on purpose.
Every other line that cannot be read is a problem with its file and line number and what to do about it; the
reader collects all of them (``ParallelFile.problems``) and :func:`read_parallel_file` raises
:class:`ParallelFileError` listing them unless asked to skip them.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import DataError

__all__ = [
    "ParallelLine",
    "ParallelFile",
    "ParallelFileError",
    "read_parallel_file",
    "write_parallel_file",
    "DEFAULT_PIVOT_LANG",
    "LANGUAGE_CODE",
]

DEFAULT_PIVOT_LANG = "en"
HEADER_NAMES = frozenset({"text", "pivot_text", "new", "known"})
LANGUAGE_CODE = re.compile(r"[a-z]{2,3}(_[a-z]+)?")
MAX_LISTED = 20  # problems listed in an error message; the rest are counted


@dataclass(frozen=True)
class ParallelLine:
    line: int  # 1-based line number in the file
    text: str  # the sentence in the new language
    pivot_text: str  # its counterpart
    pivot_lang: str  # the counterpart's language


@dataclass
class ParallelFile:
    path: Path
    lines: list[ParallelLine]
    problems: list[str] = field(default_factory=list)  # "<file>:<line>: what is wrong; what to do"
    skipped_empty: int = 0
    sha256: str = ""  # of the file's bytes: a resumed adaptation checks it is the same file

    @property
    def pivot_languages(self) -> list[str]:
        return sorted({x.pivot_lang for x in self.lines})


class ParallelFileError(DataError):
    """A parallel file with unreadable lines (each listed with its line number) or no line at all."""


def _format_of(path: Path) -> str:
    name = path.name[:-3] if path.name.endswith(".gz") else path.name
    return "jsonl" if name.endswith(".jsonl") else "tsv"


def read_parallel_file(
    path: str | os.PathLike,
    pivot_lang: str = DEFAULT_PIVOT_LANG,
    *,
    skip_bad_lines: bool = False,
    limit: int | None = None,
) -> ParallelFile:
    """The lines of a parallel file (module docstring), in file order; at most ``limit`` of them (the first).

    Bad lines raise :class:`ParallelFileError` naming each one, unless ``skip_bad_lines`` (then they are left out
    and listed in ``problems``)."""
    path = Path(path)
    if not path.is_file():
        raise DataError("no such parallel file; give a TSV (new<TAB>known) or JSONL file", path)
    data = path.read_bytes()
    try:
        text = (gzip.decompress(data) if path.suffix == ".gz" else data).decode("utf-8")
    except (OSError, EOFError) as exc:
        raise ParallelFileError(f"not a readable gzip file ({exc})", path) from None
    except UnicodeDecodeError as exc:
        line = (gzip.decompress(data) if path.suffix == ".gz" else data)[: exc.start].count(b"\n") + 1
        raise ParallelFileError("not UTF-8 text; save the file as UTF-8", path, line) from None
    out = ParallelFile(path, [], sha256=hashlib.sha256(data).hexdigest())
    read_line = _jsonl_line if _format_of(path) == "jsonl" else _tsv_line
    pivot = pivot_lang
    for number, raw in enumerate(text.split("\n"), start=1):
        raw = raw.rstrip("\r")
        if not raw.strip():
            out.skipped_empty += number <= text.count("\n")  # the newline ending the file closes no empty line
            continue
        if number == 1 and read_line is _tsv_line:
            header = _tsv_header(raw)
            if header is not None:
                pivot = header or pivot
                continue
        try:
            out.lines.append(read_line(raw, number, pivot))
        except ValueError as exc:
            out.problems.append(f"{path}:{number}: {exc}")
        if limit is not None and len(out.lines) >= limit:
            break
    if out.problems and not skip_bad_lines:
        shown = "\n  ".join(out.problems[:MAX_LISTED])
        more = f"\n  ... and {len(out.problems) - MAX_LISTED} more" if len(out.problems) > MAX_LISTED else ""
        raise ParallelFileError(
            f"{len(out.problems)} bad line(s) (fix them, or pass --skip-bad-lines to leave them out):\n  {shown}{more}",
            path,
        )
    if not out.lines:
        raise ParallelFileError(
            "no sentence pair in the file (every line empty or bad); expected "
            'new<TAB>known lines (TSV) or {"text", "pivot_text"} objects (JSONL)',
            path,
        )
    return out


def _tsv_header(raw: str) -> str | None:
    """None: not a header; "": a header of column names; a code: a header naming the pivot language."""
    fields = [f.strip().lower() for f in raw.split("\t")]
    if len(fields) != 2:
        return None
    if all(f in HEADER_NAMES for f in fields):
        return ""
    if all(LANGUAGE_CODE.fullmatch(f) for f in fields):
        return fields[1]
    return None


def _tsv_line(raw: str, number: int, pivot_lang: str) -> ParallelLine:
    fields = raw.split("\t")
    if len(fields) != 2:
        raise ValueError(
            f"{len(fields)} tab-separated field(s), expected 2 (new-language sentence<TAB>its "
            "counterpart); a tab inside a sentence must be replaced by a space"
        )
    text, pivot_text = fields[0].strip(), fields[1].strip()
    return _checked(text, pivot_text, pivot_lang, number)


def _jsonl_line(raw: str, number: int, pivot_lang: str) -> ParallelLine:
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"not JSON ({exc.msg} at column {exc.colno}); each line must be one object "
            '{"text": ..., "pivot_text": ..., "pivot_lang": ...}'
        ) from None
    if not isinstance(obj, dict):
        raise ValueError(f'a JSON {type(obj).__name__}, expected an object with "text" and "pivot_text"')
    for key in ("text", "pivot_text"):
        if key not in obj:
            raise ValueError(f'no "{key}" field; each object needs "text" (new language) and "pivot_text"')
        if not isinstance(obj[key], str):
            raise ValueError(f'"{key}" is a {type(obj[key]).__name__}, expected a string')
    lang = obj.get("pivot_lang", pivot_lang)
    if not isinstance(lang, str) or not LANGUAGE_CODE.fullmatch(lang.strip().lower()):
        raise ValueError(f'"pivot_lang" {lang!r} is not a language code (ISO 639, e.g. "en")')
    return _checked(obj["text"].strip(), obj["pivot_text"].strip(), lang.strip().lower(), number)


def _checked(text: str, pivot_text: str, pivot_lang: str, number: int) -> ParallelLine:
    if not text:
        raise ValueError("the new-language sentence is empty; drop the line or fill it in")
    if not pivot_text:
        raise ValueError("the counterpart sentence is empty; drop the line or fill it in")
    return ParallelLine(number, text, pivot_text, pivot_lang)


def write_parallel_file(path: str | os.PathLike, pairs, lang: str, pivot_lang: str) -> Path:
    """Write ``(text, pivot_text)`` pairs atomically in the format the file name says (TSV with a ``lang<TAB>pivot``
    header, or JSONL; gzipped when it ends in ``.gz``); tabs and newlines inside a sentence become spaces."""
    from ..util.atomic import atomic_open

    path = Path(path)
    clean = [(" ".join(a.split()), " ".join(b.split())) for a, b in pairs]
    if _format_of(path) == "jsonl":
        body = "".join(
            json.dumps({"text": a, "pivot_text": b, "pivot_lang": pivot_lang}, ensure_ascii=False) + "\n"
            for a, b in clean
        )
    else:
        body = f"{lang}\t{pivot_lang}\n" + "".join(f"{a}\t{b}\n" for a, b in clean)
    data = body.encode("utf-8")
    with atomic_open(path, "wb") as fh:
        fh.write(gzip.compress(data, mtime=0) if path.suffix == ".gz" else data)
    return path
