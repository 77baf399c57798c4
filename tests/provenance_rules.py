"""Rules a committed record's provenance must pass beyond its shape, checked against git and the docs.

Each rule gives ``Problem(rule, record, message)``s; ``tests/test_record_provenance.py`` runs them over the
checkout and fails on any problem that ``tests/provenance_known_issues.yaml`` does not list with its reason (and on
a listed one that no longer occurs), and ``tests/test_record_rules.py`` shows each failing on a small git repository.

    commit-exists           the record's commit is in the repository's history (a shallow clone cannot tell: an
                            error says to fetch the whole history)
    committed-after-commit  the record's commit is an ancestor of the commit that added the record's file as it
                            is now (the latest that added or rewrote it): a record cannot name a checkout that did
                            not exist when it was committed
    dirty-cited             a record written on a dirty tree that README or a docs page cites (names its path,
                            a link or not) is cited by a sentence that says so ("dirty", "uncommitted")
    product-fingerprint     a record of the product model (its checkpoint is ``runs/model/checkpoint``) names the
                            fingerprints of the product's build record (``polyvse.provenance.PRODUCT_BUILD_RECORD``),
                            the model's or, where the build names it, its trained checkpoint's; a record of an
                            earlier build is history: it moves to an archive folder, cited from the decisions log
                            only, whatever the pages citing it say
    reconstructed-substance a block reconstructed after the fact gives each unknown field a reason of substance
                            and names at least part of its machine
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from polyvse.provenance import PRODUCT_BUILD_RECORD, is_product_checkpoint
from polyvse_train.report.product_build import BuildRecordError, build_model, mismatch

RULES = ("commit-exists", "committed-after-commit", "dirty-cited", "product-fingerprint", "reconstructed-substance")
#: words in a sentence citing a dirty record that say the tree was dirty
SAYS_DIRTY = re.compile(r"dirty|uncommitted", re.IGNORECASE)
#: the machine fields of which a reconstructed block names at least one
MACHINE_FIELDS = ("cpu", "cores", "memory_gb", "os", "python")
#: reasons that say nothing
EMPTY_REASONS = {"x", "?", "-", "na", "n/a", "none", "null", "unknown", "tbd", "todo", "not known", "no reason"}


@dataclass(frozen=True, order=True)
class Problem:
    rule: str
    record: str  # the record file (or run folder, ending in /) relative to the repository
    message: str

    def __str__(self) -> str:
        return f"{self.record}: [{self.rule}] {self.message}"


@dataclass(frozen=True)
class Block:
    record: str  # the record's name: a JSON file, or a run folder ending in /
    file: str  # the JSON file that carries the block, relative to the repository
    block: dict


def _git(repo: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["git", *args], cwd=repo, input=stdin, capture_output=True, text=True, check=False, timeout=120
    )


def blocks(repo: Path, found: dict[str, list[Path]]) -> list[Block]:
    """Every provenance block of the records ``found`` (as ``records()`` of the records' test gives them)."""
    out = []
    for name, files in sorted(found.items()):
        for path in files:
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue  # the shape test names unreadable files
            if isinstance(data, dict) and isinstance(data.get("provenance"), dict):
                out.append(Block(name, path.relative_to(repo).as_posix(), data["provenance"]))
    return out


# -- commit-exists and committed-after-commit -------------------------------------------------------------------------
def history_problems(repo: Path, found: Iterable[Block], roots: Iterable[str]) -> list[Problem]:
    found = list(found)
    shallow = _git(repo, "rev-parse", "--is-shallow-repository")
    if shallow.returncode != 0:
        return [
            Problem(
                "commit-exists",
                "*",
                f"{repo} is not a git checkout: the records' commits cannot be "
                "checked; run the tests in a clone of the repository",
            )
        ]
    if shallow.stdout.strip() == "true":
        return [
            Problem(
                "commit-exists",
                "*",
                f"{repo} is a shallow clone: a record's commit may be missing from it "
                "without being missing from the history; fetch the whole history "
                "(`git fetch --unshallow`, or actions/checkout with fetch-depth: 0)",
            )
        ]
    commits = sorted({b.block["commit"] for b in found if isinstance(b.block.get("commit"), str)})
    answer = _git(repo, "cat-file", "--batch-check", stdin="".join(f"{c}^{{commit}}\n" for c in commits))
    lines = answer.stdout.splitlines()
    known = {c for c, line in zip(commits, lines) if not line.endswith(" missing")}
    added = _adding_commits(repo, roots)
    out, ancestry = [], {}
    for b in found:
        commit = b.block.get("commit")
        if not isinstance(commit, str):
            continue  # the shape test asks for a full hash
        if commit not in known:
            out.append(
                Problem(
                    "commit-exists",
                    b.record,
                    f"{b.file}: commit {commit} is not in the repository's "
                    "history (`git cat-file -e <commit>^{commit}` fails)",
                )
            )
            continue
        adding = added.get(b.file)
        if adding is None:
            continue  # not committed yet: checked once it is
        if (commit, adding) not in ancestry:
            ancestry[commit, adding] = _git(repo, "merge-base", "--is-ancestor", commit, adding).returncode == 0
        if not ancestry[commit, adding]:
            out.append(
                Problem(
                    "committed-after-commit",
                    b.record,
                    f"{b.file}: its commit {commit[:12]} is not an ancestor of {adding[:12]}, the commit "
                    "that added the file as it is: the record names a checkout that did not exist when it was "
                    "committed",
                )
            )
    return out


def _adding_commits(repo: Path, roots: Iterable[str]) -> dict[str, str]:
    """{file: the latest commit that added or rewrote it} for every file under ``roots``: the commit that added the
    record as it is now (a record written again by a later run, as `make bench` rewrites latest.json, is a new
    record; a rename counts as an addition)."""
    log = _git(repo, "log", "--no-renames", "--diff-filter=AM", "--format=%x00%H", "--name-only", "--", *roots)
    out: dict[str, str] = {}
    for chunk in log.stdout.split("\x00"):
        lines = [line for line in chunk.splitlines() if line.strip()]
        if lines:
            for name in lines[1:]:
                out.setdefault(name, lines[0])  # newest first
    return out


# -- dirty-cited --------------------------------------------------------------------------------------------------------
#: a path of a record as a page names it: a link target or text, relative or from the repository's root
_RECORD_PATH = re.compile(r"(?<![\w-])((?:benchmarks/)?results/[^\s)\]`'\"<>|,;:*]*)")


def doc_pages(repo: Path) -> list[Path]:
    """README.md, every docs page and the benchmarks' README: the pages whose figures cite records."""
    pages = [repo / "README.md", *sorted((repo / "docs").rglob("*.md")), *sorted((repo / "benchmarks").glob("*.md"))]
    return [p for p in pages if p.is_file()]


def citations(repo: Path) -> list[tuple[str, str, str]]:
    """(page, the path it names, the sentence naming it) for every record path the pages name."""
    out = []
    for page in doc_pages(repo):
        rel = page.relative_to(repo).as_posix()
        for paragraph in re.split(r"\n\s*\n", page.read_text(encoding="utf-8")):
            for part in _sentences(paragraph):
                for m in _RECORD_PATH.finditer(part):
                    out.append((rel, m.group(1).rstrip("."), part))
    return out


def _sentences(paragraph: str) -> list[str]:
    """A paragraph's sentences; a table's or a list's rows each count as one."""
    out = []
    for chunk in re.split(r"\n(?=\s*(?:\||[-*] |\d+\. ))", paragraph):
        out += re.split(r"(?<=[.!?])\s+(?=[A-Z*`\[(])", chunk)
    return out


def _cites(path: str, record: str) -> bool:
    if record.endswith("/"):  # a run folder: the folder or any of its files
        return path == record.rstrip("/") or path.startswith(record)
    return path == record


def dirty_cited_problems(repo: Path, found: Iterable[Block]) -> list[Problem]:
    dirty = sorted({b.record for b in found if b.block.get("dirty") is True})
    if not dirty:
        return []
    out = []
    for page, path, sentence in citations(repo):
        for record in dirty:
            if _cites(path, record) and not SAYS_DIRTY.search(_RECORD_PATH.sub("", sentence)):  # not in a path
                text = " ".join(sentence.split())
                out.append(
                    Problem(
                        "dirty-cited",
                        record,
                        f"written on a dirty tree, cited by {page} without saying so: "
                        f'"{text[:160]}{"…" if len(text) > 160 else ""}"; say it in the citing '
                        'sentence ("dirty tree", "uncommitted changes") or rerun it on a clean one',
                    )
                )
    return sorted(set(out))


# -- product-fingerprint -------------------------------------------------------------------------------------------------
def product_problems(repo: Path, found: Iterable[Block]) -> list[Problem]:
    claims = [
        b
        for b in found
        if is_product_checkpoint((b.block.get("model") or {}).get("checkpoint")) and b.file != PRODUCT_BUILD_RECORD
    ]
    if not claims:
        return []
    try:
        build = build_model(repo)
    except BuildRecordError as exc:
        return [
            Problem(
                "product-fingerprint",
                b.record,
                f"{b.file} names the product model, but {exc}, so this claim cannot be checked",
            )
            for b in claims
        ]
    out = []
    for b in claims:
        model = b.block["model"]
        why = mismatch(repo, model, build)
        if why:
            out.append(
                Problem(
                    "product-fingerprint",
                    b.record,
                    f"{b.file} names the product model ({model.get('checkpoint')}): {why}; rerun it on the current "
                    "build, or move it to the archive (history, cited from the decisions log only)",
                )
            )
    return out


# -- reconstructed-substance ---------------------------------------------------------------------------------------------
def substantial(reason) -> bool:
    """A reason that says something: two words or more, not a placeholder."""
    if not isinstance(reason, str):
        return False
    text = " ".join(reason.split()).strip(" .").lower()
    return text not in EMPTY_REASONS and len(text.split()) >= 2 and sum(c.isalpha() for c in text) >= 8


def reconstructed_problems(found: Iterable[Block]) -> list[Problem]:
    out = []
    for b in found:
        rebuilt = b.block.get("reconstructed")
        if not isinstance(rebuilt, dict):
            continue
        for field, reason in sorted((rebuilt.get("unknown") or {}).items()):
            if not substantial(reason):
                out.append(
                    Problem(
                        "reconstructed-substance",
                        b.record,
                        f"{b.file}: reconstructed.unknown.{field} {reason!r} is no reason: say why the "
                        "value cannot be known",
                    )
                )
        machine = b.block.get("machine") if isinstance(b.block.get("machine"), dict) else {}
        if all(machine.get(k) is None for k in MACHINE_FIELDS):
            out.append(
                Problem(
                    "reconstructed-substance",
                    b.record,
                    f"{b.file}: a reconstructed block that names nothing of its machine "
                    f"({', '.join(MACHINE_FIELDS)} all None): its figures cannot be placed; name what "
                    "the record's files or the docs of its time say (at least the CPU or its cores)",
                )
            )
    return out


def all_problems(repo: Path, found: dict[str, list[Path]], roots: Iterable[str]) -> list[Problem]:
    bs = blocks(repo, found)
    return sorted(
        set(
            history_problems(repo, bs, roots)
            + dirty_cited_problems(repo, bs)
            + product_problems(repo, bs)
            + reconstructed_problems(bs)
        )
    )


# -- the known list -------------------------------------------------------------------------------------------------------
def read_known(path: Path) -> dict[tuple[str, str], str]:
    """{(rule, record): reason} of the known-issues file; an entry without a rule of RULES, a record or a reason is
    an error naming it."""
    import yaml

    if not path.is_file():
        return {}
    entries = yaml.safe_load(path.read_text(encoding="utf-8")) or []
    if not isinstance(entries, list):
        raise ValueError(f"{path}: a list of {{rule, record, reason}} entries expected")
    out = {}
    for i, e in enumerate(entries, 1):
        if not (
            isinstance(e, dict)
            and e.get("rule") in RULES
            and isinstance(e.get("record"), str)
            and substantial(e.get("reason"))
        ):
            raise ValueError(f"{path}: entry {i} ({e!r}) needs rule (one of {', '.join(RULES)}), record and a reason")
        out[e["rule"], e["record"]] = e["reason"]
    return out


def against_known(problems: list[Problem], known: dict[tuple[str, str], str]) -> tuple[list[Problem], list[str]]:
    """(the problems the known list does not hold, its entries that no longer occur)."""
    seen = {(p.rule, p.record) for p in problems}
    new = [p for p in problems if (p.rule, p.record) not in known]
    stale = [f"{record} [{rule}]" for rule, record in sorted(known) if (rule, record) not in seen]
    return new, stale
