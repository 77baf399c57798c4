"""Atomic file writes: the one mechanism every writer in polyvse uses.

A file is written under a temporary name beside its destination and renamed over it only when complete, so
readers never see a half-written file and a killed process leaves at worst a stray temporary file (which no
reader opens: temporary names start with a dot). On any error the temporary file is removed and the
destination is untouched; a write that fills the disk becomes a DiskFullError naming the file, the bytes it
needs and those free.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from ..errors import DataError

#: a write that fails with less than this free on its filesystem failed for want of space (libraries that write
#: files report a full disk in their own words: numpy "N requested and M written", faiss a RuntimeError)
LOW_SPACE_BYTES = 1 << 20


class DiskFullError(DataError):
    """A write refused for want of space; what was there before it is untouched."""


def free_bytes(folder: str | os.PathLike) -> int:
    """Bytes an unprivileged writer may still use on the filesystem of ``folder`` (-1 if it cannot be told)."""
    try:
        st = os.statvfs(folder)
    except OSError:
        return -1
    return st.f_bavail * st.f_frsize


def is_disk_full(exc: BaseException, folder: str | os.PathLike) -> bool:
    """Whether ``exc``, raised while writing into ``folder``, means the disk (or the quota) is full."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    if "No space left on device" in str(exc) or "os error 28" in str(exc):
        return True
    from ..errors import PolyvseError

    # an error raised on purpose says what it means; a library's failed write on a full filesystem meant that
    return (
        isinstance(exc, Exception) and not isinstance(exc, PolyvseError) and 0 <= free_bytes(folder) < LOW_SPACE_BYTES
    )


def disk_full_error(
    path: str | os.PathLike,
    needed: int | None = None,
    written: int | None = None,
    kept: str = "the file it would have replaced is untouched",
) -> DiskFullError:
    """The error for a write of ``path`` that ran out of space: ``needed`` bytes in all when known, else more than
    the ``written`` bytes it got to."""
    path = Path(path)
    free = free_bytes(path.parent if not path.is_dir() else path)
    if needed is not None:
        need = f"needs {needed:,} bytes"
    elif written:
        need = f"needs more than the {written:,} bytes it wrote before the disk filled"
    else:
        need = "needs more space"
    have = f"{free:,} bytes are free there" if free >= 0 else "the free space there is unknown"
    return DiskFullError(
        f"no space left on the device: writing it {need}, and {have}; {kept}. Free some space on "
        "that filesystem (or write somewhere else) and run the command again",
        path,
    )


@contextlib.contextmanager
def atomic_path(
    path: str | os.PathLike,
    *,
    prefix: str | None = None,
    suffix: str = ".part",
    fsync: bool = True,
    needed: int | None = None,
) -> Iterator[Path]:
    """Yield a temporary path beside `path` to be filled by the caller (e.g. a library that writes by file
    name); on success it is renamed over `path`. With `fsync` (the default) the file is flushed to disk
    before the rename and the folder after it, so the new file survives a power loss too. ``needed``: the bytes
    the file will take, for the message when the disk fills."""
    dest = Path(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}." if prefix is None else prefix, suffix=suffix, dir=dest.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        if fsync:
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; a data file should read like any other
        os.replace(tmp, dest)
    except BaseException as exc:
        full = not isinstance(exc, DiskFullError) and is_disk_full(exc, dest.parent)
        written = os.stat(tmp).st_size if full and os.path.exists(tmp) else None
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if full:
            raise disk_full_error(dest, needed, written) from exc
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
def atomic_open(
    path: str | os.PathLike,
    mode: str = "w",
    encoding: str | None = "utf-8",
    newline: str | None = "\n",
    *,
    prefix: str | None = None,
    suffix: str = ".part",
    fsync: bool = True,
) -> Iterator[IO]:
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
