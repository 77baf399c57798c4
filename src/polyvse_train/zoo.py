"""The method zoo run: every config of `configs/` trained and evaluated on F8K-ML under one protocol.

A zoo run is a list of training runs (config x split x seed, plus the Translator learning-curve points),
each in its own folder ``<out>/<config>/<split>-s<seed>[-<tag>]`` holding the usual checkpoint, metrics.json
and train_log.jsonl, plus ``zoo_run.json`` (the effective config, wall and CPU time) and, for the runs on
the official split, ``tasks.json`` (cross-lingual retrieval, STS, word translation: see
:mod:`polyvse_train.tasks`). The fold runs are the primary protocol (5-fold cross-validation over all
photos); the official split is the reference and the one the text-only tasks use, since their test data
(F8K-ML test captions) lies inside the training folds of a cross-validation.

Resumable at two levels: a finished run (its zoo_run.json matches the effective config) is skipped, and an
interrupted one continues from its training state. A run whose folder holds results of a different config
is moved aside to ``<folder>.stale-<n>``, never deleted. A failing run is recorded in ``error.json`` and the
zoo goes on.

The spec (``configs/zoo/cpu.yaml``) holds TrainConfig overrides applied to every config (and per objective),
so that every method gets the same width and training budget and the whole zoo fits a 2-core CPU machine, and
the list of runs (folds, seeds, learning-curve points).
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import resource
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import yaml

from polyvse.atomic import write_json_atomic
from polyvse.errors import DataError

from .config import TrainConfig

log = logging.getLogger("polyvse.zoo")
OFFICIAL = "official"
RUN_FILE = "zoo_run.json"
TASKS_FILE = "tasks.json"
ERROR_FILE = "error.json"


@dataclass
class ZooRun:
    """One training run of the zoo."""

    config: str  # config name (file stem)
    path: Path  # config file
    split: str  # "official" or "fold<i>of<k>"
    seed: int = 0
    overrides: dict[str, Any] = field(default_factory=dict)  # on top of the profile (learning-curve points)
    tag: str = ""  # distinguishes learning-curve points

    @property
    def run_id(self) -> str:
        return f"{self.config}/{self.split}-s{self.seed}" + (f"-{self.tag}" if self.tag else "")


@dataclass
class ZooSpec:
    """What a zoo run trains: the budget profile applied to every config and the list of runs."""

    overrides: dict[str, Any] = field(default_factory=dict)  # TrainConfig fields set for every config
    by_objective: dict[str, dict[str, Any]] = field(default_factory=dict)  # ... and per objective, on top
    folds: int = 5
    official: bool = True
    seeds: list[int] = field(default_factory=lambda: [0])
    configs: list[str] = field(default_factory=list)  # [] = every config in the config folder
    curve_configs: list[str] = field(default_factory=list)  # Translator learning curve
    curve_lang: str = ""
    curve_sizes: list[int] = field(default_factory=list)

    def profile_for(self, objective: str) -> dict[str, Any]:
        return {**self.overrides, **self.by_objective.get(objective, {})}


def load_spec(path: str | Path | None) -> ZooSpec:
    """A ZooSpec from YAML; unknown keys and TrainConfig fields that do not exist are errors naming the file."""
    if path is None:
        return ZooSpec()
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise DataError(f"cannot read the zoo spec: {exc}", path) from exc
    known = set(ZooSpec.__dataclass_fields__)
    if not isinstance(data, dict) or set(data) - known:
        raise DataError(f"a zoo spec is a mapping with keys {', '.join(sorted(known))}; unknown: "
                        f"{', '.join(sorted(set(data) - known)) if isinstance(data, dict) else data!r}", path)
    spec = ZooSpec(**data)
    base = TrainConfig().to_dict()
    for where, extra in [("overrides", spec.overrides), *((f"by_objective.{k}", v) for k, v in spec.by_objective.items())]:
        if not isinstance(extra, dict):
            raise DataError(f"{where} must be a mapping of TrainConfig field: value", path)
        TrainConfig.from_dict({**base, **extra}, source=f"{path} ({where})")  # type-checks every field
    return spec


def effective_config(run: ZooRun, spec: ZooSpec) -> TrainConfig:
    cfg = TrainConfig.load(run.path)
    data = {**cfg.to_dict(), **spec.profile_for(cfg.objective.name), **run.overrides, "split": run.split, "seed": run.seed}
    if run.split == OFFICIAL:
        data["eval_split"] = "test"
    return TrainConfig.from_dict(data, source=str(run.path))


def config_digest(cfg: TrainConfig | dict) -> str:
    """Digest of the fields that differ from TrainConfig's defaults: a field added to TrainConfig later (with a
    default that keeps the old behaviour) does not turn finished runs stale. Runs recorded before that are
    compared the same way, from the config saved beside them."""
    data = cfg.to_dict() if isinstance(cfg, TrainConfig) else cfg
    defaults = TrainConfig().to_dict()
    changed = {k: v for k, v in data.items() if k not in defaults or defaults[k] != v}
    return hashlib.sha256(json.dumps(changed, sort_keys=True).encode()).hexdigest()[:16]


def _recorded_digest(record: dict) -> str | None:
    return config_digest(record["config"]) if "config" in record else record.get("config_digest")


def find_configs(config_dir: Path, names: Iterable[str] | None = None) -> list[tuple[str, Path]]:
    """(name, path) of the zoo configs: every ``*.yaml`` directly in config_dir, or the named ones."""
    available = {p.stem: p for p in sorted(Path(config_dir).glob("*.yaml"))}
    if not available:
        raise DataError("no *.yaml configs found", config_dir)
    if not names:
        return list(available.items())
    missing = [n for n in names if n not in available]
    if missing:
        raise DataError(f"unknown config(s) {', '.join(missing)}; available: {', '.join(available)}", config_dir)
    return [(n, available[n]) for n in names]


def plan_runs(configs: Sequence[tuple[str, Path]], spec: ZooSpec) -> list[ZooRun]:
    """The official split first, then the learning-curve points (``caption_limit`` = {curve_lang: n} for each
    n, official split), then the folds split-major (fold0, fold1, ...): a partial zoo fills every table and
    plot of the report first, and has every config on the same folds."""
    folds, official, seeds = spec.folds, spec.official, spec.seeds
    curve_configs, curve_lang, curve_sizes = spec.curve_configs, spec.curve_lang, spec.curve_sizes
    paths = dict(configs)
    curve = []
    for name in curve_configs:
        if name not in paths:
            raise DataError(f"learning-curve config {name!r} is not among the zoo configs")
        for n in curve_sizes:
            curve.append(ZooRun(name, paths[name], OFFICIAL, seeds[0], {"caption_limit": {curve_lang: int(n)}},
                                tag=f"{curve_lang}{int(n)}"))

    def on(split):
        return [ZooRun(name, path, split, seed) for seed in seeds for name, path in configs]
    return (on(OFFICIAL) if official else []) + curve + [r for i in range(folds) for r in on(f"fold{i}of{folds}")]


def run_dir(out: Path, run: ZooRun) -> Path:
    return Path(out) / run.run_id


def _cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


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
    if not d.exists():
        return "todo"
    digest = config_digest(effective_config(run, spec))
    rec = d / RUN_FILE
    if rec.exists():
        if _recorded_digest(json.loads(rec.read_text(encoding="utf-8"))) != digest:
            return "stale"
        if run.split == OFFICIAL and not run.tag and not (d / TASKS_FILE).exists():
            return "tasks"
        return "done"
    if (d / ERROR_FILE).exists():
        err = json.loads((d / ERROR_FILE).read_text(encoding="utf-8"))
        return "failed" if _recorded_digest(err) == digest else "stale"
    return "partial"


class RunLock:
    """Claims a run folder for one zoo process, so several `polyvse zoo run` processes can share a plan (each
    takes the next unclaimed run). The lock file holds the owner's pid; a lock of a dead process is taken over."""

    def __init__(self, folder: Path):
        self.path = Path(folder).parent / f".{Path(folder).name}.lock"
        self.held = False

    def acquire(self) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                try:
                    pid = int(self.path.read_text() or 0)
                    os.kill(pid, 0)
                    return False  # alive: another process runs it
                except (ValueError, ProcessLookupError, FileNotFoundError):
                    self.path.unlink(missing_ok=True)  # its owner died: take over
                    continue
                except PermissionError:
                    return False
            with os.fdopen(fd, "w") as f:
                f.write(str(os.getpid()))
            self.held = True
            return True
        return False

    def release(self) -> None:
        if self.held:
            self.path.unlink(missing_ok=True)
            self.held = False


def execute(run: ZooRun, out: Path, root: Path, spec: ZooSpec, *, retry_failed: bool = False,
            progress: bool = False) -> str:
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
    from .train import TrainingStateMismatch, train

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
            t0, c0 = time.time(), _cpu_seconds()
            try:
                metrics = train(cfg, d, root, resume=True, progress=progress)
            except TrainingStateMismatch:  # a partial run of an older config/code version: keep it, start over
                log.warning("%s: its training state is from another config or vocabulary; moved to %s",
                            run.run_id, _move_aside(d))
                d.mkdir(parents=True)
                t0, c0 = time.time(), _cpu_seconds()
                metrics = train(cfg, d, root, resume=True, progress=progress)
            if "languages" not in metrics:
                raise RuntimeError(f"training stopped early: {metrics}")
            write_json_atomic(d / RUN_FILE, {
                "run_id": run.run_id, "config_name": run.config, "config_file": str(run.path),
                "config_digest": digest, "config": cfg.to_dict(), "profile": spec.profile_for(cfg.objective.name),
                "overrides": run.overrides,
                "wall_seconds": round(time.time() - t0, 1), "cpu_seconds": round(_cpu_seconds() - c0, 1),
                "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            })
        if run.split == OFFICIAL and not run.tag:
            import polyvse

            from .tasks import run_tasks

            t0 = time.time()
            tasks = run_tasks(polyvse.load(d / "checkpoint"), root)
            write_json_atomic(d / TASKS_FILE, {"seconds": round(time.time() - t0, 1), **tasks})
    except Exception as exc:  # one broken config must not stop the zoo: record it and go on
        log.error("%s failed: %s", run.run_id, exc)
        write_json_atomic(d / ERROR_FILE, {"run_id": run.run_id, "config_digest": digest, "config": cfg.to_dict(),
                                           "error": repr(exc),
                                           "traceback": traceback.format_exc()})
        return "failed"
    return "done"


def run_zoo(runs: Sequence[ZooRun], out: Path, root: Path, spec: ZooSpec, *,
            max_hours: float | None = None, retry_failed: bool = False, progress: bool = False,
            echo=print) -> dict[str, int]:
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
