"""The method zoo: every config of `configs/` trained and evaluated under one protocol, and the report.

A zoo run is a list of training runs (config x split x seed, plus learning-curve points) planned from a spec
(``configs/zoo/*.yaml``: one budget for every config, which splits and seeds), executed resumably by one or
more `polyvse zoo run` processes, and written up by `polyvse zoo report`.

    spec     the spec file, the planned runs and each run's effective config
    runner   run status, locking and execution of one run / of a plan
    results  the finished runs read back from their folders
    tables   the markdown tables of the report
    claims   the papers' conclusions and their check on the runs
    plots    the report's figures
    report   docs/results.md: the F8K-ML document and the marked blocks of other zoos (f8k-full)
    records  the small files the report reads, copied out of the run folders to be committed (results/)
    estimate CPU time of a plan, from a few timed training steps per config

On F8K-ML the fold runs are the primary protocol (5-fold cross-validation over all photos); the official
split is the reference and the one the text-only tasks use, since their test data (F8K-ML test captions) lies
inside the training folds of a cross-validation. On f8k-full the official split (1,000 test photos) is the
protocol, with more seeds for the configs a claim rests on.
"""

from .runner import ERROR_FILE, RUN_FILE, TASKS_FILE, RunLock, execute, run_zoo, status
from .spec import (
    OFFICIAL,
    ZooRun,
    ZooSpec,
    config_digest,
    effective_config,
    find_configs,
    load_spec,
    plan_runs,
    run_dir,
)

__all__ = [
    "ERROR_FILE",
    "OFFICIAL",
    "RUN_FILE",
    "TASKS_FILE",
    "RunLock",
    "ZooRun",
    "ZooSpec",
    "config_digest",
    "effective_config",
    "execute",
    "find_configs",
    "load_spec",
    "plan_runs",
    "run_dir",
    "run_zoo",
    "status",
]
