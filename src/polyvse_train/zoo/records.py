"""A zoo's run records: the small files the report reads, copied out of the run folders so they can be committed.

A run folder (``runs/``, git-ignored) holds the checkpoint and the training state, tens to hundreds of MB; what the
report reads of it is a few kilobytes: ``zoo_run.json``, ``metrics.json``, ``tasks.json``, ``train_log.jsonl`` (and
``error.json`` of a failed run). `polyvse zoo records` copies those into ``results/<zoo>/`` with the same layout,
so `polyvse zoo report --out results/<zoo>` writes the same section from the records as from the runs: the
published tables can be checked without training, and they outlive the machine that trained them.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from polyvse.util.atomic import atomic_path

from .runner import ERROR_FILE, RUN_FILE, TASKS_FILE, status
from .spec import ZooRun, ZooSpec, run_dir

RECORD_FILES = (RUN_FILE, "metrics.json", TASKS_FILE, "train_log.jsonl", ERROR_FILE)


def whole_configs(runs: Sequence[ZooRun], out: Path, spec: ZooSpec) -> tuple[list[ZooRun], list[str]]:
    """(the runs of configs whose every run in ``runs`` is done, the other configs' names in plan order)."""
    done: dict[str, bool] = {}
    for run in runs:
        done[run.config] = done.get(run.config, True) and status(out, run, spec) == "done"
    return [r for r in runs if done[r.config]], [c for c, ok in done.items() if not ok]


def copy_records(runs: Sequence[ZooRun], out: Path, to: Path, spec: ZooSpec) -> dict[str, int]:
    """Copy the records of the finished (and failed) runs of ``runs`` from ``out`` to ``to``; returns counts.

    ``out`` is the truth where it has the run: a run it holds unfinished (being trained again, or moved aside
    to be redone) loses its old records in ``to``. A run ``out`` lacks altogether (another machine trained it)
    keeps its records.
    """
    counts = {"copied": 0, "removed": 0, "kept": 0, "absent": 0}
    for run in runs:
        src, dst = run_dir(out, run), run_dir(to, run)
        state = status(out, run, spec)
        if state in ("done", "failed"):
            for name in RECORD_FILES:
                if (src / name).exists():
                    with atomic_path(dst / name) as tmp:
                        shutil.copyfile(src / name, tmp)
                elif (dst / name).exists():
                    (dst / name).unlink()
            counts["copied"] += 1
        elif src.exists() and dst.exists():
            shutil.rmtree(dst)
            counts["removed"] += 1
        else:
            counts["kept" if dst.exists() else "absent"] += 1
    return counts
