"""README is the way in: short, no lab notebook (no commit hashes, dates or issue numbers in its prose: records
carry provenance, the decisions log the history), and every link it gives leads somewhere."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
MAX_LINES = 250

_HASH = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")
_DATE = re.compile(r"\b(19|20)\d\d-[01]\d-[0-3]\d\b")
_ISSUE = re.compile(r"(?<![\w&])#\d+\b")
_LINK = re.compile(r"\]\(([^)\s]+)\)")


def prose(text: str) -> str:
    """README as its reader reads it, generated blocks included (the pages' rule: tests/test_docs.py's
    ``user_prose``, which leaves out code blocks, link targets and the provenance a block cites beside a record)."""
    from test_docs import user_prose

    return user_prose(text)


def lab_notebook_marks(text: str) -> list[str]:
    body = prose(text)
    return (
        [f"commit hash {m.group(0)}" for m in _HASH.finditer(body)]
        + [f"date {m.group(0)}" for m in _DATE.finditer(body)]
        + [f"issue number {m.group(0)}" for m in _ISSUE.finditer(body)]
    )


def test_readme_is_short_and_carries_no_history():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= MAX_LINES
    assert lab_notebook_marks(text) == []


def test_the_check_finds_what_it_looks_for():
    bad = "Adopted on 2026-11-28 (issue #27) in commit 0b1b75c.\n```\nmake 1fd8837\n```\n"
    assert lab_notebook_marks(bad) == ["commit hash 0b1b75c", "date 2026-11-28", "issue number #27"]
    assert lab_notebook_marks("EfficientNet-Lite2, 1024-d, e5, see [x](#two-commands)") == []
    assert lab_notebook_marks("<!-- x:start -->\nchosen in the rounds of 2026-11-25\n<!-- x:end -->\n") == [
        "date 2026-11-25"
    ]


def test_every_relative_link_resolves():
    text = README.read_text(encoding="utf-8")
    missing = [
        t
        for t in _LINK.findall(text)
        if "://" not in t and not t.startswith("#") and not (REPO / t.split("#", 1)[0]).exists()
    ]
    assert missing == []
