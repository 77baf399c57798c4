"""Code, configs and scripts speak to polyvse's users and contributors, as the pages do (tests/test_docs.py): no
issue numbers or commit hashes of the team's work in their comments, docstrings and help texts, and no dates there
either. That history belongs in docs/decisions.md; each record carries its own provenance.

What is read as prose: in Python, comments, docstrings and the strings given as ``help=``, ``description=`` or
``epilog=``; in YAML, TOML, shell scripts and the Makefile, comments (issue numbers and commit hashes anywhere on the line,
since a config's text fields are shown to users too). Other string literals are data (a pinned upstream commit, a
record's timestamp, a test fixture) and are not read. Markdown under src/ (it ships in the wheel) gets the pages'
own check, ``lab_notebook_marks``."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

from test_docs import _DATE, _HASH, _ISSUE, lab_notebook_marks

REPO = Path(__file__).resolve().parents[1]

# Files another change still has to clean, each with why it is here. This list must shrink to nothing.
ALLOWED: dict[str, str] = {}

_PROSE_KEYWORDS = {"help", "description", "epilog"}
_COMMENT = re.compile(r"(?:^|\s)#.*$")


def scanned_files() -> list[Path]:
    """Every file of the code, configs, benchmarks, scripts and examples (build outputs left out)."""
    found: set[Path] = set()
    for pattern in ("src/**/*.py", "src/**/*.yaml", "src/**/*.md", "benchmarks/*.py", "scripts/*", "examples/*"):
        found.update(p for p in REPO.glob(pattern) if p.is_file() and ".egg-info" not in str(p))
    found.update((REPO / "Makefile", REPO / "pyproject.toml"))
    return sorted(p for p in found if p.exists() and "__pycache__" not in p.parts)


def _prose_spans(tree: ast.AST) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """(start, end) positions of the docstrings and help texts in a module's syntax tree."""
    spans = []
    for node in ast.walk(tree):
        prose = []
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                prose.append(first.value)
        if isinstance(node, ast.keyword) and node.arg in _PROSE_KEYWORDS:
            prose.append(node.value)
        spans += [
            ((n.lineno, n.col_offset), (n.end_lineno, n.end_col_offset))
            for n in prose
            if isinstance(n, ast.JoinedStr) or (isinstance(n, ast.Constant) and isinstance(n.value, str))
        ]
    return spans


def python_prose(text: str) -> list[tuple[int, str]]:
    """(line, text) of each comment and each docstring or help-text line of Python source ``text``."""
    spans = _prose_spans(ast.parse(text))
    pieces = []
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            pieces.append((tok.start[0], tok.string))
        elif tok.type == tokenize.STRING and any(a <= tok.start < b for a, b in spans):
            pieces += [(tok.start[0] + i, line) for i, line in enumerate(tok.string.splitlines())]
    return pieces


def history_marks(path: Path) -> list[str]:
    """``file:line: kind 'word'`` for each issue number, commit hash or date in the prose of ``path``."""
    text = path.read_text(encoding="utf-8", errors="replace")
    name = str(path.relative_to(REPO)) if path.is_relative_to(REPO) else path.name
    if path.suffix == ".md":
        return [f"{name}: {m}" for m in lab_notebook_marks(text)]
    checks = (("issue number", _ISSUE), ("commit hash", _HASH), ("date", _DATE))
    if path.suffix == ".py":
        pieces = [(n, s, checks) for n, s in python_prose(text)]
    else:
        pieces = []
        for n, line in enumerate(text.splitlines(), 1):
            comment = _COMMENT.search(line)
            pieces.append((n, line, checks[:2]))
            if comment:
                pieces.append((n, comment.group(0), checks[2:]))
    return [
        f"{name}:{n}: {label} {m.group(0)!r}" for n, s, kinds in pieces for label, rx in kinds for m in rx.finditer(s)
    ]


def test_code_configs_and_scripts_carry_no_history_of_the_team():
    found = [
        mark for path in scanned_files() if str(path.relative_to(REPO)) not in ALLOWED for mark in history_marks(path)
    ]
    assert found == [], "say what the code does and why instead (the history goes in docs/decisions.md):\n" + "\n".join(
        found
    )


def test_the_allow_list_names_only_files_that_still_need_it():
    stale = [name for name in ALLOWED if not (REPO / name).exists() or not history_marks(REPO / name)]
    assert stale == [], f"clean now, take them off ALLOWED: {stale}"


def test_the_check_finds_what_it_looks_for(tmp_path):
    code = tmp_path / "bad.py"
    code.write_text(
        '"""Adopted (issue #27) at commit 0b1b75c."""\n'
        "import argparse\n"
        'PIN = "b5393e59e3f273fa10df4fb7c8f36d8fb5cdf7e4"  # since 2026-11-28\n'
        'STAMP = "2026-11-28T15:40:02+00:00"\n'
        "def f():\n"
        '    """Caption #0 of photo 1000268201_693b08cb0e.jpg."""\n'
        '    argparse.ArgumentParser().add_argument("--x", help="as in " "issue 31")\n',
        encoding="utf-8",
    )
    assert [m.split(": ", 1)[1] for m in history_marks(code)] == [
        "issue number 'issue #27'",
        "commit hash '0b1b75c'",
        "date '2026-11-28'",
        "issue number 'issue 31'",
    ]
    assert [m.split(": ", 1)[0] for m in history_marks(code)] == ["bad.py:1", "bad.py:1", "bad.py:3", "bad.py:7"]
    config = tmp_path / "c.yaml"
    config.write_text(
        "# the zoo (issue #13)\nname: x  # 2026-11-24\ndescription: at 4bf4b19\nstamp: 2026-11-24\n", encoding="utf-8"
    )
    assert [m.split(": ", 1)[1] for m in history_marks(config)] == [
        "issue number 'issue #13'",
        "date '2026-11-24'",
        "commit hash '4bf4b19'",
    ]
    page = tmp_path / "README.md"
    page.write_text("Run on a GPU window lent for 15 minutes (2026-11-27).\n", encoding="utf-8")
    assert len(history_marks(page)) == 3
