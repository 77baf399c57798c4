"""scripts/product_records.py: every product record regenerated on one build, moved into place only when every
step succeeded, on a clean tree; its steps name the commands the committed records say wrote them."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("product_records", REPO / "scripts" / "product_records.py")
pr = importlib.util.module_from_spec(_spec)
sys.modules["product_records"] = pr
_spec.loader.exec_module(pr)


def test_each_step_writes_a_committed_record_by_the_command_that_record_names():
    checked = 0
    for step in pr.STEPS:
        script = next(w for w in step.command if w.endswith(".py") or w == "{polyvse}")
        for dest in step.records.values():
            if step.name == "soak" and not (REPO / dest).is_file():
                continue  # run only with --soak; its last record, of an earlier build, is in the archive
            assert (REPO / dest).is_file(), f"{step.name}: {dest} is not committed"
            if not dest.endswith(".json"):
                continue
            recorded = (json.loads((REPO / dest).read_text(encoding="utf-8")).get("provenance") or {}).get("command")
            if recorded:  # a reconstructed block may not know it
                shown = script.replace("{polyvse}", "polyvse")
                assert shown in recorded, f"{dest} was written by {recorded!r}, the step runs {shown}"
                checked += 1
    assert checked >= 4


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "results").mkdir(parents=True)
    (repo / "results" / "a.json").write_text('{"v": "old"}\n')
    (repo / "results" / "b.json").write_text('{"v": "old"}\n')
    (repo / ".gitignore").write_text("runs/\n")
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"]):
        subprocess.run(["git", *args], cwd=repo, check=True)
    return repo


def _step(name: str, record: str, code: str) -> pr.Step:
    return pr.Step(name, {f"{name}.json": record}, (sys.executable, "-c", code, "{out}"), needs_build=False)


def _writes(name: str) -> str:
    return f"import sys, pathlib; pathlib.Path(sys.argv[1], '{name}.json').write_text('{{\"v\": \"new\"}}')"


def test_records_move_only_when_every_step_succeeded(tmp_path):
    repo = _repo(tmp_path)
    good, bad = _step("a", "results/a.json", _writes("a")), _step("b", "results/b.json", "raise SystemExit(3)")
    with pytest.raises(pr.RecordsError, match="step b failed .exit 3.*nothing was moved"):
        pr.run([good, bad], repo, tmp_path, log=lambda *_: None)
    assert json.loads((repo / "results" / "a.json").read_text()) == {"v": "old"}  # a succeeded, yet stays
    moved = pr.run([good, _step("b", "results/b.json", _writes("b"))], repo, tmp_path, log=lambda *_: None)
    assert sorted(moved) == ["results/a.json", "results/b.json"]
    assert json.loads((repo / "results" / "b.json").read_text()) == {"v": "new"}


def test_a_dirty_tree_or_a_missing_build_is_refused(tmp_path):
    repo = _repo(tmp_path)
    (repo / "results" / "a.json").write_text("{}")
    with pytest.raises(pr.RecordsError, match="uncommitted changes .results/a.json"):
        pr.run([_step("a", "results/a.json", _writes("a"))], repo, tmp_path)
    subprocess.run(["git", "checkout", "-q", "results/a.json"], cwd=repo, check=True)
    languages = next(s for s in pr.STEPS if s.name == "languages")
    with pytest.raises(pr.RecordsError, match="no product checkpoint and index; run with --build"):
        pr.run([languages], repo, tmp_path)
    assert pr.main(["--only", "nope"]) == 2
