"""`polyvse zoo run|status|report|records|compare|estimate`: train every config of the method zoo and write docs/results.md."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

from polyvse.util.paths import data_root

DEFAULT_SPEC = "configs/zoo/cpu.yaml"


def register(sub) -> None:
    p = sub.add_parser("zoo", help="train and evaluate every config of configs/ (the method zoo) and report")
    zsub = p.add_subparsers(dest="zoo_command", required=True)
    for name, helptext in [
        ("run", "train + evaluate the planned runs (resumable; finished runs are skipped)"),
        ("status", "list the planned runs and their state"),
        ("report", "write docs/results.md (or the spec's block of it) and its plots from the finished runs"),
        (
            "records",
            "copy the finished runs' small record files (what the report reads) to a "
            "folder that can be committed; `zoo report --out FOLDER` reads them",
        ),
        (
            "compare",
            "set the finished official runs (or their records, --out) against an "
            "earlier record of the same zoo (--before): what a change moved",
        ),
        ("estimate", "CPU minutes per run of each config, from a few timed training steps"),
    ]:
        q = zsub.add_parser(name, help=helptext)
        _add_common_args(q)
        q.set_defaults(func=run)
        extra = {
            "run": _add_run_args,
            "report": _add_report_args,
            "records": _add_records_args,
            "compare": _add_compare_args,
            "estimate": _add_estimate_args,
        }.get(name)
        if extra is not None:
            extra(q)


def _add_common_args(q) -> None:
    """Every zoo command's: the spec, the configs and the run folders."""
    q.add_argument("--spec", default=DEFAULT_SPEC, help="zoo spec: budget overrides and runs (default: %(default)s)")
    q.add_argument("--configs-dir", default="configs", help="folder of the configs (default: %(default)s)")
    q.add_argument("--configs", help="comma-separated config names (default: the spec's list, else all)")
    q.add_argument("--out", help="run folders (default: the spec's `out`, runs/zoo for the F8K-ML zoo)")
    q.add_argument("--data-root", help="data root (default: $POLYVSE_DATA, else ~/.cache/polyvse)")


def _add_run_args(q) -> None:
    """`zoo run`: time limit, retries, progress bars and worker processes."""
    q.add_argument("--max-hours", type=float, help="start no new run after this many hours")
    q.add_argument("--retry-failed", action="store_true", help="run again the runs that failed before")
    q.add_argument("--progress", action="store_true", help="progress bars of each training")
    q.add_argument(
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="N worker processes share the plan, each taking the next unclaimed run "
        "(one per free core: trainings use one thread each; default: %(default)s)",
    )


def _add_report_args(q) -> None:
    """`zoo report`: where the page, the plots and the README block go."""
    q.add_argument("--docs", default="docs", help="where results.md and the PNGs go (default: %(default)s)")
    q.add_argument(
        "--readme",
        default="README.md",
        help="README whose <!-- zoo-best --> block gets the best config per language "
        "(F8K-ML zoo only; default: %(default)s; '' = leave it)",
    )
    q.add_argument(
        "--compare-out",
        default="runs/zoo",
        help="runs of the F8K-ML zoo, for the side-by-side claims of another zoo's block; "
        "when absent, they are read from the F8K-ML section of results.md "
        "(default: %(default)s)",
    )


def _add_records_args(q) -> None:
    """`zoo records`: where the record files go, and which configs."""
    q.add_argument(
        "--to", help="where the records go (default: results/<name of the runs folder>, e.g. results/zoo-f8k-full)"
    )
    q.add_argument(
        "--whole-configs",
        action="store_true",
        help="only configs whose every planned run (all seeds) is done: a zoo retrained "
        "config by config never commits a config with some seeds new and some old",
    )


def _add_compare_args(q) -> None:
    """`zoo compare`: the earlier records (or results.md) and where the table goes."""
    before = q.add_mutually_exclusive_group(required=True)
    before.add_argument(
        "--before",
        help="the earlier records, e.g. `git archive <commit> results/zoo-f8k-full | tar -x -C "
        "DIR` then DIR/results/zoo-f8k-full",
    )
    before.add_argument(
        "--before-doc",
        help="an earlier results.md of the F8K-ML zoo (`git show <commit>:docs/results.md > "
        "FILE`): its cross-validation table against the retrained configs' folds",
    )
    q.add_argument(
        "--docs",
        default="docs",
        help="results.md's <!-- zoo-<title>-before-after --> block gets the table, if it has one; "
        "else it is printed (default: %(default)s)",
    )


def _add_estimate_args(q) -> None:
    """`zoo estimate`: timed steps and a JSON copy."""
    q.add_argument("--steps", type=int, default=40, help="timed steps per stage (default: %(default)s)")
    q.add_argument("--json", help="also write the estimates to this JSON file")


def _plan(args):
    from polyvse_train.zoo import find_configs, load_spec, plan_runs

    spec = load_spec(args.spec)
    names = args.configs.split(",") if args.configs else (spec.configs or None)
    configs = find_configs(Path(args.configs_dir), names, spec.own_settings)
    known = [n for n, _ in find_configs(Path(args.configs_dir), None, spec.own_settings)]
    return spec, configs, plan_runs(configs, spec, known)


def _states(runs, out, spec, listing: bool) -> dict[str, int]:
    """How many runs of the plan are in each state (``listing``: print each run's); a run a worker holds now
    shows as running."""
    from polyvse_train.zoo import RunLock, run_dir, status

    counts: dict[str, int] = {}
    for r in runs:
        st = status(out, r, spec)
        if st in ("todo", "partial", "tasks") and RunLock(run_dir(out, r)).taken_elsewhere():
            st = "running"
        counts[st] = counts.get(st, 0) + 1
        if listing:
            print(f"{st:8s} {r.run_id}" + (_progress(run_dir(out, r)) if st in ("running", "partial") else ""))
    print(", ".join(f"{k}: {v}" for k, v in sorted(counts.items())))
    return counts


def _progress(folder: Path) -> str:
    """How far a started run got, from its training log's last line (all stages count: a Translator's source
    epochs come before the target's, MULE's LP pretraining before its main epochs)."""
    log = folder / "train_log.jsonl"
    try:
        last = json.loads(log.read_text(encoding="utf-8").strip().splitlines()[-1])
        return f"  (epoch {last['epoch']} done, {last['seconds'] / 60:.0f} min)"
    except (OSError, IndexError, ValueError, KeyError, TypeError):
        return ""  # nothing logged yet (or a line being written)


def _estimate(args, runs, spec) -> int:
    from polyvse_train.zoo.estimate import estimate_plan

    estimates = estimate_plan(runs, spec, data_root(args.data_root), steps=args.steps)
    per_config = {name: est.seconds() / 60 for name, est in estimates.items()}
    total = sum(per_config[r.config] for r in runs if r.config in per_config)
    print(
        f"plan: {len(runs)} runs, {total / 60:.1f} CPU-hours "
        f"(~{total / 120:.1f} h wall with two one-thread workers on 2 free cores)"
    )
    if args.json:
        Path(args.json).write_text(
            json.dumps({n: e.to_dict() for n, e in estimates.items()}, indent=1) + "\n", encoding="utf-8"
        )
    return 0


def _records(args, runs, out, spec) -> int:
    from polyvse_train.zoo.records import copy_records

    to = Path(args.to or Path("results") / out.name)
    if to.resolve() == out.resolve():
        from polyvse.errors import PolyvseError

        raise PolyvseError(f"--to {to} is the runs folder itself; give another folder")
    if args.whole_configs:
        from polyvse_train.zoo.records import whole_configs

        runs, left = whole_configs(runs, out, spec)
        if left:
            print(f"left for later (not every seed done): {', '.join(left)}")
    counts = copy_records(runs, out, to, spec)
    print(f"records of {out} in {to}: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    return 0


def _compare(args, spec, configs, out) -> int:
    from polyvse_train.zoo.compare import compare_folds_with_doc, compare_records
    from polyvse_train.zoo.report import update_readme_block

    order = [n for n, _ in configs]
    if args.before_doc:
        doc = Path(args.before_doc)
        table = compare_folds_with_doc(doc.read_text(encoding="utf-8"), out, order, str(doc))
    else:
        table = compare_records(Path(args.before), out, order)
    tag = f"zoo-{spec.title or 'f8k-ml'}-before-after"
    results = Path(args.docs) / "results.md"
    if results.exists() and update_readme_block(results, table, tag):
        print(f"wrote the <!-- {tag} --> block of {results}")
    else:
        print(table, end="")
    return 0


def _report(args, spec, configs, runs, out) -> int:
    from polyvse_train.zoo.block import write_block_report
    from polyvse_train.zoo.report import write_report

    order, planned = [n for n, _ in configs], [r.run_id for r in runs]
    from polyvse_train.zoo.spec import MAKE_TARGETS

    command = MAKE_TARGETS.get(args.spec, f"polyvse zoo run --spec {args.spec}")
    if spec.title:
        path = write_block_report(
            out, Path(args.docs) / "results.md", planned, order, command, spec, compare_out=Path(args.compare_out)
        )
    else:
        readme = Path(args.readme) if args.readme else None
        path = write_report(
            out, Path(args.docs), planned, order, command, spec, readme=readme if readme and readme.exists() else None
        )
    print(f"wrote {path}")
    return 0


def _worker_command(args) -> list[str]:
    """This `polyvse zoo run` as one worker process (--jobs 1)."""
    cmd = [sys.executable, "-m", "polyvse_app.cli", "zoo", "run", "--jobs", "1"]
    for flag, value in [
        ("--spec", args.spec),
        ("--configs-dir", args.configs_dir),
        ("--configs", args.configs),
        ("--out", args.out),
        ("--data-root", args.data_root),
        ("--max-hours", args.max_hours),
    ]:
        if value is not None:
            cmd += [flag, str(value)]
    return cmd + ["--retry-failed"] * args.retry_failed + ["--progress"] * args.progress


def _run_workers(args, runs, out, spec) -> int:
    """--jobs N: N worker processes share the plan (each run is claimed by a file lock, polyvse_train.zoo.RunLock),
    then one summary of the whole plan. Stopping this process (Ctrl-C, SIGTERM) stops the workers; every run
    resumes where it was on the next `polyvse zoo run`."""
    import signal
    import subprocess

    cmd = _worker_command(args)
    print(f"{args.jobs} workers: {' '.join(cmd)}", flush=True)
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the finally below stops the workers
    procs: list[subprocess.Popen] = []
    try:
        procs = [subprocess.Popen(cmd) for _ in range(args.jobs)]
        codes = [p.wait() for p in procs]
    except KeyboardInterrupt:  # Ctrl-C reached the workers too; each run resumes where its state was saved
        print("stopped; run the same command again to continue", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            p.wait()
    counts = _states(runs, out, spec, listing=False)
    return 1 if any(codes) or counts.get("failed") else 0


def run(args) -> int:
    from polyvse.errors import PolyvseError
    from polyvse_train.zoo import run_zoo

    if args.zoo_command == "run" and args.jobs < 1:
        raise PolyvseError(f"--jobs must be at least 1, not {args.jobs}")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    spec, configs, runs = _plan(args)
    out = Path(args.out or spec.out)
    if args.zoo_command == "status":
        _states(runs, out, spec, listing=True)
        return 0
    if args.zoo_command == "estimate":
        return _estimate(args, runs, spec)
    if args.zoo_command == "records":
        return _records(args, runs, out, spec)
    if args.zoo_command == "compare":
        return _compare(args, spec, configs, out)
    if args.zoo_command == "run" and args.jobs > 1:
        return _run_workers(args, runs, out, spec)
    if args.zoo_command == "run":
        counts = run_zoo(
            runs,
            out,
            data_root(args.data_root),
            spec,
            max_hours=args.max_hours,
            retry_failed=args.retry_failed,
            progress=args.progress,
        )
        print(", ".join(f"{k}: {v}" for k, v in sorted(counts.items())))
        return 1 if counts.get("failed") else 0
    return _report(args, spec, configs, runs, out)
