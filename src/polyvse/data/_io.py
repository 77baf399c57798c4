"""Small shared helpers for the corpus readers: cached line reading, atomic writes, id parsing."""

from __future__ import annotations

import contextlib
import functools
import gc
import gzip
import os
import re
import unicodedata
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Iterator
from pathlib import Path

from ..errors import DataError, MissingDataError

_FLICKR_NAME = re.compile(r"^(\d+)_[0-9A-Za-z]+$")


@functools.lru_cache(maxsize=65536)
def flickr_id(name: str) -> str:
    """Flickr photo id from a file name: "1000268201_693b08cb0e.jpg" -> "1000268201", "1000268201.jpg"
    -> "1000268201". Names of other shapes give their stem (everything before the first ".jpg")."""
    base = name.rsplit("/", 1)[-1]
    idx = base.lower().find(".jpg")
    stem = base[:idx] if idx > 0 else base.rsplit(".", 1)[0] if "." in base else base
    m = _FLICKR_NAME.match(stem)
    if m:
        return m.group(1)
    return stem


def caption_key(text: str) -> str:
    """Normalised form of a caption for identity checks and de-duplication: Unicode NFKC,
    case-folded, all whitespace removed, trailing sentence punctuation dropped. Two captions
    that differ only in tokenisation ("way ." vs "way.") or case get the same key."""
    if text.isascii():
        t = text.lower()
    else:
        t = unicodedata.normalize("NFKC", text).casefold()
    return "".join(t.split()).rstrip(".。!！")


def stat_key(path: Path) -> tuple[str, int, int]:
    """(resolved path, mtime_ns, size): a cache key that changes when the file does."""
    st = path.stat()
    return (str(path.resolve()), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=256)
def _lines_cached(key: tuple[str, int, int]) -> tuple[str, ...]:
    path = key[0]
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rb") as fh:
            raw = fh.read()
    except (OSError, EOFError) as exc:  # gzip.BadGzipFile is an OSError
        raise DataError(f"cannot read file ({exc}); re-fetch it with `polyvse data fetch`", path) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise DataError(
            f"not valid UTF-8 text (byte {exc.start}); re-fetch the file or save it as UTF-8", path, line
        ) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    # Split on "\n" only: str.splitlines() would also split on U+2028, U+0085 etc. inside a caption
    # and silently shift every later line of a line-aligned corpus.
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return tuple(line[:-1] if line.endswith("\r") else line for line in lines)


def read_lines(path: str | os.PathLike) -> tuple[str, ...]:
    """All lines of a text file (gzip if it ends in .gz), without line ends, cached in-process by
    path + mtime + size (so an edited file is re-read)."""
    p = Path(path)
    try:
        key = stat_key(p)
    except FileNotFoundError:
        raise MissingDataError("file not found", p) from None
    return _lines_cached(key)


def require_file(path: Path, what: str, fetch_name: str | None) -> Path:
    if not path.is_file():
        hint = (
            (
                f"run `polyvse data fetch {fetch_name}` (or `--from DIR` for a local mirror) "
                "or point --data-root at the folder that holds it"
            )
            if fetch_name
            else "check the path"
        )
        raise MissingDataError(f"{what} not found; {hint}", path)
    return path


def require_dir(path: Path, what: str, fetch_name: str | None) -> Path:
    if not path.is_dir():
        hint = (
            (
                f"run `polyvse data fetch {fetch_name}` (or `--from DIR` for a local mirror) "
                "or point --data-root at the folder that holds it"
            )
            if fetch_name
            else "check the path"
        )
        raise MissingDataError(f"{what} not found; {hint}", path)
    return path


_KEYS: OrderedDict[Hashable, tuple[str, ...]] = OrderedDict()
_KEYS_MAX = 64


def cached_keys(cache_key: Hashable, texts: Callable[[], Iterable[str]]) -> tuple[str, ...]:
    """`caption_key` of every text from `texts()`, computed once per `cache_key` (which should
    include the file's `stat_key`, so an edited file is keyed anew). Small LRU of whole files."""
    hit = _KEYS.get(cache_key)
    if hit is not None:
        _KEYS.move_to_end(cache_key)
        return hit
    keys = tuple(map(caption_key, texts()))
    _KEYS[cache_key] = keys
    while len(_KEYS) > _KEYS_MAX:
        _KEYS.popitem(last=False)
    return keys


@contextlib.contextmanager
def bulk_allocation() -> Iterator[None]:
    """Pause the cyclic garbage collector while building hundreds of thousands of small objects
    (none of them cyclic): its repeated full scans otherwise cost about a third of the time."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
