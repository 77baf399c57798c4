"""Atomic file writes: the one mechanism every writer in polyvse uses.

A file is written under a temporary name beside its destination and renamed over it only when complete, so
readers never see a half-written file and a killed process leaves at worst a stray temporary file (which no
reader opens: temporary names start with a dot). On any error the temporary file is removed and the
destination is untouched.
"""
from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, *, prefix: str | None = None, suffix: str = ".part",
                fsync: bool = True) -> Iterator[Path]:
    """Yield a temporary path beside `path` to be filled by the caller (e.g. a library that writes by file
    name); on success it is renamed over `path`. With `fsync` (the default) the file is flushed to disk
    before the rename and the folder after it, so the new file survives a power loss too."""
    dest = Path(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}." if prefix is None else prefix, suffix=suffix,
                               dir=dest.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        if fsync:
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; a data file should read like any other
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    if fsync:
        fsync_dir(dest.parent)


def fsync_dir(folder: Path) -> None:
    """Make a rename inside `folder` durable (best effort: not every filesystem allows it)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", encoding: str | None = "utf-8",
                newline: str | None = "\n", *, prefix: str | None = None, suffix: str = ".part",
                fsync: bool = True) -> Iterator[IO]:
    """`open(path, mode)` that only replaces `path` once the `with` block has completed."""
    with atomic_path(path, prefix=prefix, suffix=suffix, fsync=False) as tmp:
        kwargs = {} if "b" in mode else {"encoding": encoding, "newline": newline}
        with open(tmp, mode, **kwargs) as fh:
            yield fh
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
    if fsync:
        fsync_dir(Path(path).parent)


def write_json_atomic(path: str | os.PathLike, data: Any) -> None:
    with atomic_open(path, "w", suffix=".tmp") as fh:
        json.dump(data, fh, indent=2, ensure_ascii=False)
        fh.write("\n")
