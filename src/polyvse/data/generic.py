"""Bring your own data: a folder of photos plus a captions file.

Captions file formats (chosen by extension; otherwise a file whose first non-blank character is
"{" is JSONL, anything else CSV):

  CSV (.csv; .tsv = tab-separated), UTF-8, first line a header naming the columns:
      image,lang,caption            (lang optional; split optional; other columns ignored)
      beach/001.jpg,en,"A dog runs on the sand, chasing a ball."
  JSONL (.jsonl / .ndjson), one JSON object per line:
      {"image": "beach/001.jpg", "lang": "en", "caption": "A dog runs on the sand.", "split": "test"}

Fields:
  image    path of the photo relative to the images folder ("/" separates folders; "\\" is read as
           "/"). Absolute paths, "~", ".." components and symlinks that lead outside the folder are
           rejected. Photo.id is this normalised relative path (e.g. "beach/001.jpg").
  lang     ISO 639-1 code of a supported language; when the column/field is absent or empty,
           `default_lang` is used (no default_lang -> the line is a problem).
  caption  the sentence; whitespace runs (including newlines) become one space; must not be empty.
  split    optional: "train", "val" or "test". Absent or empty -> `default_split`, which is "train":
           a folder you bring is by default training data. Pass default_split="test" (CLI:
           --opt default_split=test) to evaluate on it instead. A photo must stay in one split: a
           line that puts an already-seen photo in another split is a problem (it would leak
           evaluation photos into training).

Problems -- a line whose photo file is missing, a malformed line (wrong number of columns, bad
JSON, missing field, empty caption, unknown language or split), a duplicate (same image + lang +
caption as an earlier line) -- are reported as DataError objects with file and line number
(`path:line: what is wrong; what to do`) in `reader.problems`, and the line is skipped. With
strict=True the first problem is raised instead. Problems that make the whole file unusable
(missing file or folder, not UTF-8, no header, no usable line at all) always raise DataError.
"""

from __future__ import annotations

import csv
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from ..errors import DataError, UnknownLanguageError
from ..languages import check_language
from .types import Caption, Corpus, Photo

SPLITS = ("train", "val", "test")
_DRIVE = re.compile(r"^[A-Za-z]:")
_SPLIT_HINTS = {"dev": "val", "valid": "val", "validation": "val", "training": "train", "eval": "test"}


class _Problem(Exception):
    """A problem with one line (message = `what is wrong; what to do`)."""


class GenericCaptionsReader:
    """Reads a user's photo folder + captions file (CSV or JSONL) into a Corpus; see module docstring."""

    def __init__(
        self,
        images_dir: str | os.PathLike,
        captions_file: str | os.PathLike,
        *,
        default_lang: str | None = None,
        default_split: str = "train",
        strict: bool = False,
        fmt: str | None = None,
        name: str = "generic",
    ):
        self.images_dir = Path(images_dir)
        self.captions_file = Path(captions_file)
        self.default_lang = check_language(default_lang, "default_lang") if default_lang else None
        if default_split not in SPLITS:
            raise DataError(f"default_split must be one of {', '.join(SPLITS)}, not {default_split!r}")
        self.default_split = default_split
        self.strict = strict
        if fmt is not None and fmt not in ("csv", "tsv", "jsonl"):
            raise DataError(f"format must be csv, tsv or jsonl, not {fmt!r}")
        self.fmt = fmt
        self.name = name
        self.problems: list[DataError] = []

    # -- public -------------------------------------------------------------------------------------
    def read(self) -> Corpus:
        self.problems = []
        if not self.images_dir.is_dir():
            raise DataError("images folder not found; pass the folder that holds the photos", self.images_dir)
        if not self.captions_file.is_file():
            raise DataError("captions file not found; pass a CSV or JSONL file", self.captions_file)
        self._root = self.images_dir.resolve()
        self._image_cache: dict[str, tuple[str, Path] | _Problem] = {}
        text = self._decode()
        fmt = self.fmt or self._guess_format(text)
        rows = self._jsonl_rows(text) if fmt == "jsonl" else self._csv_rows(text, "\t" if fmt == "tsv" else ",")

        corpus = Corpus(self.name)
        seen: dict[tuple[str, str, str], int] = {}
        photo_split: dict[str, tuple[str, int]] = {}
        for line, fields in rows:
            try:
                if isinstance(fields, _Problem):
                    raise fields
                pid, path, lang, caption, split = self._validate(fields)
                key = (pid, lang, caption)
                if key in seen:
                    raise _Problem(
                        f"duplicate of line {seen[key]} (same image, language and caption); remove one of the two lines"
                    )
                if pid in photo_split and photo_split[pid][0] != split:
                    first_split, first_line = photo_split[pid]
                    raise _Problem(
                        f"photo {pid} is put in split {split!r} here but in {first_split!r} on line "
                        f"{first_line}; a photo must be in one split only (give every line of it the "
                        "same split)"
                    )
            except _Problem as exc:
                self._problem(str(exc), line)
                continue
            seen[key] = line
            photo_split.setdefault(pid, (split, line))
            if pid not in corpus.photos:
                corpus.photos[pid] = Photo(pid, path)
            corpus.captions.append(Caption(pid, lang, caption, "generic", split))
        if not corpus.captions:
            first = f" First problem: {self.problems[0]}" if self.problems else ""
            raise DataError(
                f"no usable caption line ({len(self.problems)} problem(s)); fix the file.{first}", self.captions_file
            )
        return corpus

    def problem_report(self) -> str:
        """All problems, one per line."""
        return "\n".join(str(p) for p in self.problems)

    # -- parsing --------------------------------------------------------------------------------------
    def _problem(self, message: str, line: int | None) -> None:
        err = DataError(message, self.captions_file, line)
        if self.strict:
            raise err
        self.problems.append(err)

    def _decode(self) -> str:
        raw = self.captions_file.read_bytes()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = raw.count(b"\n", 0, exc.start) + 1
            raise DataError(
                f"not UTF-8 text (byte {exc.start}); save the file as UTF-8", self.captions_file, line
            ) from None
        return text[1:] if text.startswith("\ufeff") else text

    def _guess_format(self, text: str) -> str:
        ext = self.captions_file.suffix.lower()
        if ext in (".jsonl", ".ndjson"):
            return "jsonl"
        if ext == ".tsv":
            return "tsv"
        if ext == ".csv":
            return "csv"
        return "jsonl" if text.lstrip().startswith("{") else "csv"

    def _csv_rows(self, text: str, delimiter: str) -> Iterator[tuple[int, dict | _Problem]]:
        # Feed the csv module physical lines (split on "\n" only, so U+2028 etc. stay inside captions;
        # "\r\n" endings keep their "\r", which csv handles); quoted multi-line fields still work.
        lines = (ln + "\n" for ln in text.split("\n"))
        header: list[str] | None = None
        base = 0  # physical lines consumed by earlier (abandoned) csv readers
        reader = csv.reader(lines, delimiter=delimiter, strict=True)
        line = 1
        while True:
            try:
                fields = next(reader)
            except StopIteration:
                break
            except csv.Error as exc:
                yield (
                    line,
                    _Problem(
                        f"malformed CSV ({exc}); check the double quotes on this line "
                        '(a quote inside a quoted caption is written "")'
                    ),
                )
                # start over on the next physical line
                base += reader.line_num
                line = base + 1
                reader = csv.reader(lines, delimiter=delimiter, strict=True)
                continue
            start, line = line, base + reader.line_num + 1
            if not fields or all(not f.strip() for f in fields):
                continue
            if header is None:
                header = [f.strip().lower() for f in fields]
                self._check_header(header, fields, start, delimiter)
                continue
            if len(fields) != len(header):
                names = delimiter.join(header)
                yield (
                    start,
                    _Problem(
                        f"expected {len(header)} fields ({names}), found {len(fields)}; "
                        "put double quotes around a caption that contains the separator"
                    ),
                )
                continue
            yield start, dict(zip(header, fields))
        if header is None:
            raise DataError(
                "empty captions file; the first line must be a header such as `image,lang,caption`",
                self.captions_file,
                1,
            )

    def _check_header(self, header: list[str], fields: list[str], line: int, delimiter: str) -> None:
        sep = delimiter if delimiter != "\t" else "<TAB>"
        want = f"image{sep}lang{sep}caption"
        if len(set(header)) != len(header):
            raise DataError(
                f"header repeats a column name ({sep.join(fields)}); name each column once", self.captions_file, line
            )
        missing = [c for c in ("image", "caption") if c not in header]
        if missing:
            raise DataError(
                f"the first line must be a header such as `{want}` (lang and split optional); "
                f"got {sep.join(fields)[:80]!r}, missing {', '.join(missing)}",
                self.captions_file,
                line,
            )

    def _jsonl_rows(self, text: str) -> Iterator[tuple[int, dict | _Problem]]:
        for i, raw in enumerate(text.split("\n"), 1):
            raw = raw.strip()
            if not raw:
                continue
            try:
                obj = json.loads(raw)
            except json.JSONDecodeError as exc:
                yield (
                    i,
                    _Problem(
                        f"bad JSON ({exc.msg} at column {exc.colno}); write one JSON object per line, "
                        'e.g. {"image": "a.jpg", "lang": "en", "caption": "..."}'
                    ),
                )
                continue
            if not isinstance(obj, dict):
                yield i, _Problem('line is JSON but not an object; write {"image": ..., "lang": ..., "caption": ...}')
                continue
            bad = [
                k
                for k in ("image", "lang", "caption", "split")
                if k in obj and obj[k] is not None and not isinstance(obj[k], str)
            ]
            if bad:
                yield (
                    i,
                    _Problem(f"field {bad[0]!r} must be a string, got {type(obj[bad[0]]).__name__}; quote the value"),
                )
                continue
            yield i, obj

    # -- validation -----------------------------------------------------------------------------------
    def _validate(self, fields: dict) -> tuple[str, Path, str, str, str]:
        image = (fields.get("image") or "").strip()
        if not image:
            raise _Problem("no image name; give the photo's path relative to the images folder")
        pid, path = self._image(image)
        caption = " ".join((fields.get("caption") or "").split())
        if not caption:
            raise _Problem("empty caption; write the caption or remove the line")
        lang_value = (fields.get("lang") or "").strip()
        if lang_value:
            try:
                lang = check_language(lang_value)
            except UnknownLanguageError as exc:
                raise _Problem(f"{exc}; fix the lang value") from None
        elif self.default_lang:
            lang = self.default_lang
        else:
            raise _Problem("no language; fill the lang column/field or pass default_lang (CLI: --opt default_lang=en)")
        split_value = (fields.get("split") or "").strip().lower()
        split = split_value or self.default_split
        if split not in SPLITS:
            hint = f" (did you mean {_SPLIT_HINTS[split]!r}?)" if split in _SPLIT_HINTS else ""
            raise _Problem(f"unknown split {split_value!r}{hint}; use train, val or test, or leave it empty")
        return pid, path, lang, caption, split

    def _image(self, name: str) -> tuple[str, Path]:
        cached = self._image_cache.get(name)
        if cached is None:
            try:
                cached = self._resolve_image(name)
            except _Problem as exc:
                cached = exc
            self._image_cache[name] = cached
        if isinstance(cached, _Problem):
            raise cached
        return cached

    def _resolve_image(self, name: str) -> tuple[str, Path]:
        norm = name.replace("\\", "/")
        if norm.startswith(("/", "~")) or _DRIVE.match(norm):
            raise _Problem(f"image path {name!r} is absolute; give it relative to the images folder {self.images_dir}")
        parts = [p for p in PurePosixPath(norm).parts if p not in ("", ".")]
        if ".." in parts:
            raise _Problem(
                f"image path {name!r} contains '..'; photos must be inside the images folder {self.images_dir}"
            )
        if not parts:
            raise _Problem(f"image path {name!r} names no file; give the photo's file name")
        rel = "/".join(parts)
        full = self.images_dir.joinpath(*parts)
        resolved = full.resolve()
        if not resolved.is_relative_to(self._root):
            raise _Problem(
                f"image {rel!r} leads outside the images folder (symbolic link?); copy the photo into the folder"
            )
        if not resolved.is_file():
            raise _Problem(f"photo file not found: {full}; check the file name (case matters) or remove the line")
        return rel, resolved


def load_generic(images: str | os.PathLike, captions: str | os.PathLike, **opts) -> Corpus:
    """Corpus of a user folder; problem lines are skipped (strict=True raises on the first). The
    reader's problem list is attached to the result as `corpus.problems` so callers can show it."""
    reader = GenericCaptionsReader(images, captions, **opts)
    corpus = reader.read()
    corpus.problems = reader.problems  # type: ignore[attr-defined]
    return corpus
