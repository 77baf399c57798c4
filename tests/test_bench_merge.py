"""run_all.py --merge: one record from a run that failed at a step and a rerun of that step alone, at the same
commit on the same machine; refused where the two cannot stand as one run."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
sys.path.insert(0, str(REPO / "benchmarks"))
import run_all  # noqa: E402

FAILED = "bench_scale.py exited with status 1 after 862s (see its output above)"


@pytest.fixture()
def runs() -> tuple[dict, dict]:
    """(a full run whose scale step failed, a rerun of the scale step alone), from the committed record."""
    full = json.loads((RESULTS / "latest.json").read_text(encoding="utf-8"))
    full.pop("merged", None)  # the committed record may itself be a merge
    earlier = copy.deepcopy(full)
    for key in [k for k in earlier if k.startswith("scale_")]:
        earlier[key] = None
    earlier["notes"] = {k: v for k, v in earlier["notes"].items() if not k.startswith("scale_")}
    earlier["notes"].update(dict.fromkeys(run_all.SCALE_KEYS, FAILED))
    earlier["details"].pop("scale", None)
    later = copy.deepcopy(full)
    for key in [k for k in later if run_all._step_of(k) not in (None, "scale")]:
        later[key] = None
    later["notes"] = {k: v for k, v in full["notes"].items() if k.startswith("scale_")}
    later["details"] = {"scale": full["details"]["scale"]}
    later["step_seconds"] = {"scale": full["step_seconds"]["scale"]}
    later["machine"] = {**full["machine"], "date_utc": "2031-01-02T03:04:05+00:00", "load_average_at_start": [0.5]}
    return earlier, later


def test_the_rerun_step_replaces_the_failed_one_and_every_other_step_stays(runs):
    earlier, later = runs
    full = json.loads((RESULTS / "latest.json").read_text(encoding="utf-8"))
    merged = run_all.merge_records(earlier, later)
    full.pop("merged", None)
    for key in full:
        if run_all._step_of(key) == "scale":
            assert merged[key] == full[key], key
        elif run_all._step_of(key) is not None:
            assert merged[key] == earlier[key], key
    assert FAILED not in merged["notes"].values()
    assert merged["details"]["scale"] == full["details"]["scale"]
    assert merged["details"]["search"] == earlier["details"]["search"]
    assert merged["step_seconds"] == {**earlier["step_seconds"], "scale": later["step_seconds"]["scale"]}
    assert merged["merged"]["steps"] == ["scale"]
    first, second = merged["merged"]["runs"]
    assert first["notes_replaced"] == dict.fromkeys(run_all.SCALE_KEYS, FAILED)
    assert "scale" not in first["steps"] and second["steps"] == ["scale"]


def test_the_pages_say_which_steps_came_from_the_second_run(runs):
    from polyvse_train.report.bench import bench_markdown
    from polyvse_train.report.bench_page import bench_page

    merged = run_all.merge_records(*runs)
    said = "Its scale step came from a second run at the same commit on the same machine (load average 0.5 at its start"
    assert said in bench_markdown(merged) and FAILED in bench_markdown(merged)
    assert said in bench_page(merged, run_all.HEADLINE)
    assert "second run" not in bench_markdown(runs[0])


@pytest.mark.parametrize(
    "change, says",
    [
        (lambda r: r.update(git_commit="0" * 40), "the commits differ"),
        (lambda r: r.update(git_dirty=True), "names no clean commit"),
        (lambda r: r.update(quick=True), "--quick run"),
        (lambda r: r["machine"].update(cores=64), "machine.cores differs"),
        (lambda r: r["provenance"].update(model={"fingerprint": "sha256:other"}), "different product models"),
        (lambda r: r.update(step_seconds={}), "ran no step"),
    ],
)
def test_two_runs_that_cannot_stand_as_one_are_refused(runs, change, says):
    earlier, later = runs
    change(later)
    with pytest.raises(ValueError, match=says):
        run_all.merge_records(earlier, later)


def test_the_command_writes_both_files_or_refuses_saying_why(runs, tmp_path):
    earlier, later = runs
    paths = []
    for name, r in (("earlier.json", earlier), ("later.json", later)):
        paths.append(tmp_path / name)
        paths[-1].write_text(json.dumps(r))
    script = [sys.executable, str(REPO / "benchmarks" / "run_all.py"), "--merge", *map(str, paths)]
    done = subprocess.run([*script, "--results-dir", str(tmp_path / "out")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    written = json.loads((tmp_path / "out" / "latest.json").read_text())
    assert written["merged"]["steps"] == ["scale"]
    assert "second run" in (tmp_path / "out" / "latest.md").read_text()
    later["git_commit"] = "0" * 40
    paths[1].write_text(json.dumps(later))
    refused = subprocess.run([*script, "--results-dir", str(tmp_path / "no")], capture_output=True, text=True)
    assert refused.returncode == 2 and "the commits differ" in refused.stderr
    assert not (tmp_path / "no").exists()
