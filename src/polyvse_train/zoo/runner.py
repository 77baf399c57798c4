"""Running a zoo: train and evaluate each planned run in its own folder, resumably, several processes at once.

Each run lives in ``<out>/<config>/<split>-s<seed>[-<tag>]`` holding the usual checkpoint, metrics.json
and train_log.jsonl, plus ``zoo_run.json`` (the effective config, wall and CPU time) and, for the runs on
the official split when the spec asks for them, ``tasks.json`` (cross-lingual retrieval, STS, word
translation: see :mod:`polyvse.evaluation.tasks`).

Resumable at two levels: a finished run (its zoo_run.json matches the effective config) is skipped, and an
interrupted one continues from its training state. A run whose folder holds results of a different config
is moved aside to ``<folder>.stale-<n>``, never deleted. A failing run is recorded in ``error.json`` and the
zoo goes on, except for missing data (:class:`polyvse.errors.MissingDataError`), which stops the zoo unrecorded.
"""

from __future__ import annotations

import json
import logging
import time
import traceback
from collections.abc import Sequence
from pathlib import Path

from polyvse.errors import MissingDataError
from polyvse.provenance import machine as this_machine, no_model, provenance
from polyvse.util.atomic import write_json_atomic

from .spec import OFFICIAL, ZooRun, ZooSpec, config_digest, effective_config, run_dir

log = logging.getLogger("polyvse.zoo")
RUN_FILE = "zoo_run.json"
TASKS_FILE = "tasks.json"
ERROR_FILE = "error.json"


def machine() -> str:
    """This machine in short (``zoo_run.json``'s ``machine``, which the zoo's tables count; ``provenance`` has
    the details)."""
    m = this_machine()
    return f"{m['cpu']}, {m['cores']} cores, {m['gpu'] or 'no GPU'}"


def needs_tasks(run: ZooRun, spec: ZooSpec) -> bool:
    """The text-only tasks run on the official split's plain runs (no learning-curve point), if the spec asks."""
    return spec.tasks and run.split == OFFICIAL and not run.tag


def _recorded_digest(record: dict) -> str | None:
    return config_digest(record["config"]) if "config" in record else record.get("config_digest")


def _time_spent(metrics: dict) -> dict:
    """The run's wall and CPU seconds over all the processes that trained it, as the training counted them
    (``time_complete`` false when a state of older code did not say what earlier processes spent)."""
    return {
        "wall_seconds": metrics["wall_time_s"],
        "cpu_seconds": metrics["cpu_time_s"],
        "processes": metrics["processes"],
        "time_complete": metrics["time_complete"],
    }


def _move_aside(folder: Path) -> Path:
    n = 1
    while folder.with_name(f"{folder.name}.stale-{n}").exists():
        n += 1
    target = folder.with_name(f"{folder.name}.stale-{n}")
    folder.rename(target)
    return target


def status(out: Path, run: ZooRun, spec: ZooSpec) -> str:
    """done | tasks (trained, tasks missing) | partial (state to resume) | stale | failed | todo."""
    d = run_dir(out, run)
    if not d.exists() or not any(d.iterdir()):  # an empty folder: a run stopped before it wrote anything
        return "todo"
    digest = config_digest(effective_config(run, spec))
    rec = d / RUN_FILE
    if rec.exists():
        if _recorded_digest(json.loads(rec.read_text(encoding="utf-8"))) != digest:
            return "stale"
        if needs_tasks(run, spec) and not (d / TASKS_FILE).exists():
            return "tasks"
        return "done"
    if (d / ERROR_FILE).exists():
        err = json.loads((d / ERROR_FILE).read_text(encoding="utf-8"))
        return "failed" if _recorded_digest(err) == digest else "stale"
    return "partial"


class RunLock:
    """Claims a run folder for one zoo process, so several `polyvse zoo run` processes can share a plan (each
    takes the next unclaimed run). An OS file lock (``filelock``): the kernel drops it when its process dies, so a
    killed worker's run is free again at once and no stale lock needs judging (pids get reused). The lock file
    itself stays beside the run folder: unlinking a lock file lets two processes lock two different files."""

    def __init__(self, folder: Path):
        self.path = Path(folder).parent / f".{Path(folder).name}.lock"
        self._lock = None

    @property
    def held(self) -> bool:
        return self._lock is not None

    def acquire(self) -> bool:
        from filelock import FileLock, Timeout

        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(self.path, timeout=0)
        try:
            lock.acquire()
        except Timeout:
            return False  # another process runs it
        self._lock = lock
        return True

    def release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def taken_elsewhere(self) -> bool:
        """Whether another process holds the run now (a zoo worker is training it)."""
        if self.held or not self.path.exists():
            return False
        if not self.acquire():
            return True
        self.release()
        return False


def execute(
    run: ZooRun, out: Path, root: Path, spec: ZooSpec, *, retry_failed: bool = False, progress: bool = False
) -> str:
    """Train and evaluate one run unless it is done or another zoo process holds it; returns its status
    ("busy" for the latter)."""
    lock = RunLock(run_dir(out, run))
    if not lock.acquire():
        return "busy"
    try:
        return _execute(run, out, root, spec, retry_failed=retry_failed, progress=progress)
    finally:
        lock.release()


def _execute(run: ZooRun, out: Path, root: Path, spec: ZooSpec, *, retry_failed: bool, progress: bool) -> str:
    from ..train import TrainingStateMismatch, train

    d = run_dir(out, run)
    st = status(out, run, spec)
    if st == "done" or (st == "failed" and not retry_failed):
        return st
    if st == "stale":
        log.warning("%s holds results of another config; moved to %s", d, _move_aside(d))
    cfg = effective_config(run, spec)
    digest = config_digest(cfg)
    d.mkdir(parents=True, exist_ok=True)
    (d / ERROR_FILE).unlink(missing_ok=True)
    try:
        if st != "tasks":
            try:
                metrics = train(cfg, d, root, resume=True, progress=progress)
            except TrainingStateMismatch:  # a partial run of an older config/code version: keep it, start over
                log.warning(
                    "%s: its training state is from another config or vocabulary; moved to %s",
                    run.run_id,
                    _move_aside(d),
                )
                d.mkdir(parents=True)
                metrics = train(cfg, d, root, resume=True, progress=progress)
            if "languages" not in metrics:
                raise RuntimeError(f"training stopped early: {metrics}")
            write_json_atomic(
                d / RUN_FILE,
                {
                    "run_id": run.run_id,
                    "config_name": run.config,
                    "config_file": str(run.path),
                    "config_digest": digest,
                    "config": cfg.to_dict(),
                    "profile": spec.profile_of(run.config, cfg.objective.name),
                    "overrides": run.overrides,
                    **_time_spent(metrics),
                    "machine": machine(),
                    "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "threads_used": metrics.get("threads_used"),
                    # the run's: the checkout it trained on, the checkpoint it saved (metrics.json carries the same)
                    "provenance": metrics.get("provenance")
                    or provenance(
                        model=d / "checkpoint"
                        if (d / "checkpoint").is_dir()
                        else no_model("the training wrote no checkpoint")
                    ),
                },
            )
        if needs_tasks(run, spec):
            import polyvse
            from polyvse.evaluation.tasks import run_tasks
            from polyvse.modules.pretrained.captions import use_sentence_cache

            t0 = time.time()
            tasks = run_tasks(use_sentence_cache(polyvse.load(d / "checkpoint"), root), root)
            write_json_atomic(d / TASKS_FILE, {"seconds": round(time.time() - t0, 1), **tasks})
    except MissingDataError:
        # data not fetched / wrong data root: every later run would fail alike, and marking them all failed would
        # make the user pass --retry-failed after fetching; stop here with nothing recorded instead
        log.error("%s: data missing, the zoo stops here (no run is marked failed)", run.run_id)
        raise
    except Exception as exc:  # one broken config must not stop the zoo: record it and go on
        log.error("%s failed: %s", run.run_id, exc)
        write_json_atomic(
            d / ERROR_FILE,
            {
                "run_id": run.run_id,
                "config_digest": digest,
                "config": cfg.to_dict(),
                "error": repr(exc),
                "traceback": traceback.format_exc(),
            },
        )
        return "failed"
    return "done"


def run_zoo(
    runs: Sequence[ZooRun],
    out: Path,
    root: Path,
    spec: ZooSpec,
    *,
    max_hours: float | None = None,
    retry_failed: bool = False,
    progress: bool = False,
    echo=print,
) -> dict[str, int]:
    """Execute the runs in order; stops starting new ones after ``max_hours``. Returns counts per status."""
    t0 = time.time()
    counts: dict[str, int] = {}
    for i, run in enumerate(runs, 1):
        if max_hours is not None and time.time() - t0 > max_hours * 3600:
            echo(f"time budget of {max_hours} h used: stopping before {run.run_id} ({len(runs) - i + 1} runs left)")
            counts["not_started"] = len(runs) - i + 1
            break
        before = status(out, run, spec)
        if before == "done":
            counts["done"] = counts.get("done", 0) + 1
            continue
        t = time.time()
        st = execute(run, out, root, spec, retry_failed=retry_failed, progress=progress)
        counts[st] = counts.get(st, 0) + 1
        echo(f"[{i}/{len(runs)}] {run.run_id}: {st} ({time.time() - t:.0f} s)")
    return counts
