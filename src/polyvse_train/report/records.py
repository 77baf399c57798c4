"""Reading committed records for a generated block: one place that names the file when a record is missing or
broken, and the links a block writes to them."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from polyvse.errors import PolyvseError


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
        return f"[`{label or record}`]({self.link(record)})"

    def read(self, record: str) -> dict:
        return read_record(self.repo, record)


def read_record(repo: Path, record: str) -> dict:
    """The JSON record at ``repo/record``; a missing or broken one is an error naming it."""
    path = repo / record
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RecordError(f"{record}: no such record; regenerate it with the command its block names, or "
                          "remove the block") from None
    except (OSError, ValueError) as exc:
        raise RecordError(f"{record}: cannot read it as JSON ({exc})") from None
