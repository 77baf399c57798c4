"""Files a user names (a folder of photos, a list of photo paths, a captions file): found and read with
errors that name the file and say what is wrong."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import DataError

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".webp", ".bmp", ".gif", ".tif", ".tiff"}


def read_text(path: str | os.PathLike, what: str) -> str:
    """The UTF-8 text of a user's file; ``what`` names it in errors ("captions file", "list file")."""
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"{what} not found", path) from None
    except UnicodeDecodeError as exc:
        raise DataError(f"{what} is not UTF-8 text ({exc.reason} at byte {exc.start})", path) from None
    except OSError as exc:
        raise DataError(f"cannot read the {what} ({exc.strerror or exc})", path) from None


def photos_in_folder(folder: Path) -> list[Path]:
    """The image files under ``folder`` (recursively, hidden files and folders left out), sorted."""
    if not folder.is_dir():
        raise DataError("no such folder (--images wants a folder of photos)", folder)
    photos = [
        p
        for p in folder.rglob("*")
        if p.suffix.lower() in IMAGE_SUFFIXES
        and not any(part.startswith(".") for part in p.relative_to(folder).parts)
        and not p.is_dir()
    ]
    return sorted(photos)


def photos_in_list(list_file: Path) -> list[Path]:
    """The photo paths of a list file, one a line (relative to the list's folder; blank lines and # comments
    skipped)."""
    base = list_file.parent
    photos = []
    for line in read_text(list_file, "list file").splitlines():
        entry = line.strip()
        if not entry or entry.startswith("#"):
            continue
        p = Path(entry).expanduser()
        photos.append(p if p.is_absolute() else base / p)
    return photos


def photo_source(images: str | None, list_file: str | None) -> tuple[list[Path], Path]:
    """(the photos of a folder or of a list file, the folder their names are relative to); at least one photo."""
    source = Path(images if images else list_file).expanduser()
    photos = photos_in_folder(source) if images else photos_in_list(source)
    if not photos:
        raise DataError(f"no {'image files' if images else 'photo paths'} found", source)
    return photos, source if images else source.parent
