"""Every committed record says where it came from (provenance on every record).

What a *record* is, under ``results/`` and ``benchmarks/results/``:

* A **run folder** -- a folder holding ``metrics.json`` (a training run: metrics, train log, ``zoo_run.json``,
  ``tasks.json``, ``training.json``, a make log) -- is ONE record. Its provenance is the ``"provenance"`` block of
  its JSON files: at least one of them carries it, and every block present is complete.
* Every other ``*.json`` file is a record of its own, with a top-level ``"provenance"`` block.
* Any other file (``.jsonl``, ``.log``, ``.md``, ``.csv``, ``.png``, ...) is a *companion*: it needs a record
  (a JSON file other than a companion) in the same folder.
* ``results/archive/`` and ``benchmarks/results/archive/`` are history and exempt, but each must hold a
  README.md that names them as history.

*Complete* is :func:`polyvse.provenance.provenance_problems` with nothing to say: schema, date (ISO 8601 with time
and zone), full commit, dirty flag, machine (CPU model, cores, memory, GPU or none, OS, Python), the command that
wrote it, polyvse version, and the model it measured (checkpoint fingerprint, path, config) or why none. A block
written after the fact (a one-off migration of older records) is marked ``reconstructed`` with its sources and may
leave ``dirty``, ``model.fingerprint`` and the machine's memory/OS/Python as None, each with its reason.

Beyond the shape, every record passes the rules of ``tests/provenance_rules.py`` against git and the docs: its
commit is in the history and an ancestor of the commit that added the record, a dirty record is cited only by
sentences that say so, a record of the product model names the product build record's fingerprints, and a
reconstructed block gives reasons of substance and names its machine. The cases that break a rule today are listed,
each with its reason, in ``tests/provenance_known_issues.yaml``: the test prints them and fails on any other.

``POLYVSE_RECORDS_ROOT`` points the walk at another checkout (a copy with a record's provenance removed must fail).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from polyvse.provenance import (
    RECONSTRUCTED_MAY_BE_UNKNOWN,
    REPO as CHECKOUT,
    SCHEMA,
    git_state,
    no_model,
    provenance,
    provenance_problems,
)

REPO = Path(os.environ.get("POLYVSE_RECORDS_ROOT") or Path(__file__).resolve().parent.parent)
ROOTS = ("results", "benchmarks/results")
KNOWN_ISSUES = Path(__file__).resolve().parent / "provenance_known_issues.yaml"
ARCHIVE = "archive"
RUN_FILE = "metrics.json"


def _is_record_file(path: Path) -> bool:
    return path.suffix == ".json"


def records(repo: Path = REPO) -> tuple[dict[str, list[Path]], list[str]]:
    """({record name: the JSON files that may carry its provenance}, problems of the layout)."""
    found: dict[str, list[Path]] = {}
    layout: list[str] = []
    for root in ROOTS:
        base = repo / root
        if not base.is_dir():
            continue
        archive = base / ARCHIVE
        readme = archive / "README.md"
        if archive.exists() and not (readme.is_file() and "history" in readme.read_text(encoding="utf-8").lower()):
            layout.append(f"{root}/{ARCHIVE}: needs a README.md naming it as history")
        for folder, dirs, files in os.walk(base):
            here = Path(folder)
            if here == archive:
                dirs.clear()
                continue
            rel = here.relative_to(repo).as_posix()
            jsons = sorted(here / f for f in files if _is_record_file(here / f))
            if RUN_FILE in files:
                found[rel + "/"] = jsons
            else:
                found.update({p.relative_to(repo).as_posix(): [p] for p in jsons})
            companions = [f for f in files if not _is_record_file(here / f)]
            if companions and not jsons:
                layout.append(f"{rel}: {', '.join(sorted(companions))} without a JSON record beside them")
    return found, layout


def record_problems(repo: Path = REPO) -> list[str]:
    """One line per record without complete provenance (and per layout problem)."""
    found, out = records(repo)
    for name, files in sorted(found.items()):
        blocks = []
        for path in files:
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                out.append(f"{path.relative_to(repo)}: unreadable ({exc})")
                continue
            if isinstance(data, dict) and "provenance" in data:
                blocks.append((path, data["provenance"]))
        if not blocks:
            out.append(f"{name}: no provenance block")
        for path, block in blocks:
            out += [f"{path.relative_to(repo)}: {p}" for p in provenance_problems(block)]
    return out


def test_every_record_has_complete_provenance():
    found, _ = records()
    assert found, f"no records found under {ROOTS} of {REPO}"
    problems = record_problems()
    assert not problems, (
        f"{len(problems)} records lack provenance (tests/test_record_provenance.py says what a "
        "record is; write it with polyvse.provenance.provenance()):\n" + "\n".join(problems[:40])
    )


def test_every_record_passes_the_history_citation_product_and_reconstruction_rules():
    """Shows the known cases (``-s`` prints them; a warning counts them) and fails on any other."""
    import warnings

    from provenance_rules import against_known, all_problems, read_known

    known = read_known(KNOWN_ISSUES)
    found, _ = records()
    new, stale = against_known(all_problems(REPO, found, ROOTS), known)
    listed = [f"{record} [{rule}]: {reason}" for (rule, record), reason in sorted(known.items())]
    print(f"{len(listed)} known provenance issues ({KNOWN_ISSUES.name}):\n" + "\n".join(listed))
    if known:
        warnings.warn(
            f"{len(known)} records break a provenance rule, each listed with its reason in {KNOWN_ISSUES.name}",
            stacklevel=1,
        )
    assert not new, (
        f"{len(new)} records break a provenance rule (tests/provenance_rules.py says each rule):\n"
        + "\n".join(map(str, new[:40]))
    )
    assert not stale, f"no longer a problem: remove from {KNOWN_ISSUES.name}: " + ", ".join(stale)


# -- the walk itself ---------------------------------------------------------------------------------------------
def _write(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")


def test_the_walk_fails_a_bare_record_and_a_lone_companion(tmp_path):
    good = provenance(model=no_model("synthetic vectors"))
    _write(tmp_path / "results" / "ok.json", {"x": 1, "provenance": good})
    _write(tmp_path / "results" / "run" / "metrics.json", {"x": 1})
    _write(tmp_path / "results" / "run" / "zoo_run.json", {"provenance": good})  # the run's provenance
    assert record_problems(tmp_path) == []
    _write(tmp_path / "results" / "bare.json", {"x": 1})
    (tmp_path / "benchmarks" / "results" / "logs").mkdir(parents=True)
    (tmp_path / "benchmarks" / "results" / "logs" / "a.log").write_text("x")
    _write(tmp_path / "results" / "archive" / "old.json", {"x": 1})  # exempt, but needs its README
    problems = record_problems(tmp_path)
    assert "results/bare.json: no provenance block" in problems
    assert any(p.startswith("benchmarks/results/logs: a.log without a JSON record") for p in problems)
    assert any(p.startswith("results/archive: needs a README.md") for p in problems)
    assert not any("old.json" in p for p in problems)
    (tmp_path / "results" / "archive" / "README.md").write_text("History: records of superseded models.")
    assert len(record_problems(tmp_path)) == 2


# -- provenance() ------------------------------------------------------------------------------------------------
def test_provenance_fields_and_types():
    block = provenance(["polyvse", "evaluate", "--json", "a b.json"], model=no_model("word lists"))
    assert block["schema"] == SCHEMA and provenance_problems(block) == []
    assert block["command"] == "polyvse evaluate --json 'a b.json'"
    assert "T" in block["date"] and block["date"][-6] in "+-"  # time and zone
    m = block["machine"]
    assert m["cpu"] and m["cores"] >= 1 and m["memory_gb"] > 0 and "gpu" in m and m["os"] and m["python"]
    assert block["polyvse_version"] and block["model"] == {"none": "word lists"}
    script = Path(sys.argv[0]).resolve()
    first = script.relative_to(CHECKOUT).as_posix() if script.is_relative_to(CHECKOUT) else sys.argv[0]
    argv = [first if os.path.isabs(sys.argv[0]) else sys.argv[0], *sys.argv[1:]]
    assert provenance()["command"] == shlex.join((["python"] if argv[0].endswith(".py") else []) + argv)


def test_provenance_import_needs_no_torch():
    code = "import sys, polyvse.provenance as p; p.provenance(model=p.no_model('x')); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_dirty_flag_follows_tracked_files(tmp_path):
    def run(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    run("init", "-q")
    run("config", "user.email", "t@example.com")
    run("config", "user.name", "t")
    (tmp_path / "a.txt").write_text("1")
    run("add", "a.txt")
    run("commit", "-qm", "one")
    clean = provenance(model=no_model("x"), cwd=tmp_path)
    assert len(clean["commit"]) == 40 and clean["dirty"] is False and clean["dirty_files"] == []
    (tmp_path / "new.txt").write_text("untracked files do not count")
    assert git_state(tmp_path)["dirty"] is False
    (tmp_path / "a.txt").write_text("2")
    assert (git_state(tmp_path)["dirty"], git_state(tmp_path)["dirty_files"]) == (True, ["a.txt"])
    run("add", "a.txt")  # staged counts too
    assert git_state(tmp_path)["dirty"] is True
    assert git_state(tmp_path / "nowhere")["commit"] is None


def test_the_checker_rejects_gaps_and_accepts_reasoned_unknowns():
    good = provenance(model={"fingerprint": "sha256:" + "0" * 64, "checkpoint": "runs/x/checkpoint", "config": "vse"})
    assert provenance_problems(good) == []
    assert provenance_problems(None) == ["no provenance block"]
    for key in ("commit", "dirty", "date", "command", "machine", "model", "polyvse_version"):
        assert provenance_problems({k: v for k, v in good.items() if k != key}), key
    assert provenance_problems({**good, "date": "2026-11-28"})  # no time, no zone
    assert provenance_problems({**good, "commit": "abc1234"})  # short hash
    assert provenance_problems({**good, "model": {"none": None}})  # provenance(model=None): must say why
    assert provenance_problems({**good, "dirty": None})  # unknown outside a reconstructed block
    rebuilt = {
        **good,
        "dirty": None,
        "model": {**good["model"], "fingerprint": None},
        "reconstructed": {"from": ["git log"], "by": "scripts/backfill_provenance.py"},
    }
    assert any("reason" in p for p in provenance_problems(rebuilt))
    rebuilt["reconstructed"]["unknown"] = {"dirty": "not stated", "model.fingerprint": "checkpoint not kept"}
    assert provenance_problems(rebuilt) == []
    assert provenance_problems({**rebuilt, "commit": None})  # never unknown
    assert set(RECONSTRUCTED_MAY_BE_UNKNOWN) >= {"dirty", "model.fingerprint"}


@pytest.mark.parametrize("field", ["reconstructed"])
def test_a_reconstructed_block_names_its_sources(field):
    block = {**provenance(model=no_model("x")), field: {"from": [], "by": ""}}
    assert any(p.startswith("reconstructed:") for p in provenance_problems(block))
