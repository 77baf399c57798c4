"""`polyvse zoo run|status|report`: train every config of the method zoo and write docs/results.md."""
from __future__ import annotations

import logging
from pathlib import Path

from polyvse.paths import data_root

DEFAULT_SPEC = "configs/zoo/cpu.yaml"
COMMAND = "make zoo"


def register(sub) -> None:
    p = sub.add_parser("zoo", help="train and evaluate every config of configs/ (the method zoo) and report")
    zsub = p.add_subparsers(dest="zoo_command", required=True)
    for name, helptext in [("run", "train + evaluate the planned runs (resumable; finished runs are skipped)"),
                           ("status", "list the planned runs and their state"),
                           ("report", "write docs/results.md and its plots from the finished runs")]:
        q = zsub.add_parser(name, help=helptext)
        q.add_argument("--spec", default=DEFAULT_SPEC, help="zoo spec: budget overrides and runs (default: %(default)s)")
        q.add_argument("--configs-dir", default="configs", help="folder of the configs (default: %(default)s)")
        q.add_argument("--configs", help="comma-separated config names (default: the spec's list, else all)")
        q.add_argument("--out", default="runs/zoo", help="run folders (default: %(default)s)")
        q.add_argument("--data-root", help="data root (default: $POLYVSE_DATA, else ~/.cache/polyvse)")
        q.set_defaults(func=run)
        if name == "run":
            q.add_argument("--max-hours", type=float, help="start no new run after this many hours")
            q.add_argument("--retry-failed", action="store_true", help="run again the runs that failed before")
            q.add_argument("--progress", action="store_true", help="progress bars of each training")
        if name == "report":
            q.add_argument("--docs", default="docs", help="where results.md and the PNGs go (default: %(default)s)")
            q.add_argument("--readme", default="README.md",
                           help="README whose <!-- zoo-best --> block gets the best config per language "
                                "(default: %(default)s; '' = leave it)")


def _plan(args):
    from polyvse_train.zoo import find_configs, load_spec, plan_runs

    spec = load_spec(args.spec)
    names = args.configs.split(",") if args.configs else (spec.configs or None)
    configs = find_configs(Path(args.configs_dir), names)
    return spec, configs, plan_runs(configs, spec)


def run(args) -> int:
    from polyvse_train.zoo import run_zoo, status

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    spec, configs, runs = _plan(args)
    out = Path(args.out)
    if args.zoo_command == "status":
        counts: dict[str, int] = {}
        for r in runs:
            st = status(out, r, spec)
            counts[st] = counts.get(st, 0) + 1
            print(f"{st:8s} {r.run_id}")
        print(", ".join(f"{k}: {v}" for k, v in sorted(counts.items())))
        return 0
    if args.zoo_command == "run":
        counts = run_zoo(runs, out, data_root(args.data_root), spec, max_hours=args.max_hours,
                         retry_failed=args.retry_failed, progress=args.progress)
        print(", ".join(f"{k}: {v}" for k, v in sorted(counts.items())))
        return 1 if counts.get("failed") else 0
    from polyvse_train.zoo_report import write_report

    readme = Path(args.readme) if args.readme else None
    path = write_report(out, Path(args.docs), [r.run_id for r in runs], [n for n, _ in configs], COMMAND,
                        spec, readme=readme if readme and readme.exists() else None)
    print(f"wrote {path}")
    return 0
