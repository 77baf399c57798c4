"""Reading committed records for a generated block: one place that names the file when a record is missing or
broken, and the links a block writes to them."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from polyvse.errors import PolyvseError
from polyvse.provenance import RECONSTRUCTED_MARK

from .product_build import EARLIER_BUILD_MARK, earlier_build


class RecordError(PolyvseError):
    """A record a block is rendered from is missing or unreadable."""


@dataclass(frozen=True)
class Page:
    """The Markdown file a block is rendered into, inside the repository ``repo``."""

    repo: Path
    path: Path

    def link(self, record: str) -> str:
        """``record`` (a path relative to the repository) as a relative link from this page."""
        return Path(os.path.relpath(self.repo / record, self.path.parent)).as_posix()

    def record_link(self, record: str, label: str | None = None) -> str:
        """A link to ``record`` (a file or a folder of them), marked when its provenance was reconstructed after the
        fact (its block says ``reconstructed``, with its sources): its figures then rest on a block that was not
        written with them; and marked when it measured an earlier build of the product model than the build record's."""
        mark = f" {RECONSTRUCTED_MARK}" if reconstructed(self.repo, record) else ""
        mark += f" {EARLIER_BUILD_MARK}" if earlier_build(self.repo, record) else ""
        return f"[`{label or record}`]({self.link(record)}){mark}"

    def read(self, record: str) -> dict:
        return read_record(self.repo, record)


def reconstructed(repo: Path, record: str) -> bool:
    """Whether the provenance of ``record`` (a JSON file, or any JSON file under a folder) was reconstructed."""
    path = repo / record
    files = [path] if path.is_file() else sorted(path.rglob("*.json")) if path.is_dir() else []
    for f in files:
        try:
            data = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # read_record names a broken record when a block reads it
        if (
            isinstance(data, dict)
            and isinstance(data.get("provenance"), dict)
            and "reconstructed" in data["provenance"]
        ):
            return True
    return False


def dirty_words(record: dict) -> str:
    """What a sentence citing ``record`` says first when the record was written on an uncommitted tree."""
    return "written on an uncommitted tree, " if (record.get("provenance") or {}).get("dirty") else ""


def read_record(repo: Path, record: str) -> dict:
    """The JSON record at ``repo/record``; a missing or broken one is an error naming it."""
    path = repo / record
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RecordError(
            f"{record}: no such record; regenerate it with the command its block names, or remove the block"
        ) from None
    except (OSError, ValueError) as exc:
        raise RecordError(f"{record}: cannot read it as JSON ({exc})") from None
