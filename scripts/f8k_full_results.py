"""The f8k-full comparison: the frozen-tower baseline against polyvse's best model, 3 training seeds
each, on the 1,000-photo Flickr8K test gallery per language, and the README table made from those runs.

    python scripts/f8k_full_results.py                 # train what is missing (resumable), print the tables
    python scripts/f8k_full_results.py --readme        # ... and regenerate the docs' blocks (`polyvse report`)
    python scripts/f8k_full_results.py --jobs 2        # two trainings at a time (each uses one thread)

The runs are the f8k-full zoo's own (configs/zoo/f8k-full.yaml trains e5-frozen and polyvse-best from these
same config files with seeds 0, 1, 2): training goes through `polyvse zoo run --configs e5-frozen,polyvse-best`
into runs/zoo-f8k-full/<name>/official-s<seed>/ (metrics.json, checkpoint, tasks.json), so one training serves the
README and docs/results.md. A finished run is never retrained, a stopped one resumes from its training state; a
run of an older config file is moved aside and trained again. Numbers are the standard protocol of the Flickr8K
literature (1k test photos; R@1/5/10 both ways, median rank) plus mR (the mean of the six recalls), as mean ±
standard deviation over the seeds. de/fr/cs galleries hold the test photos that have Multi30K captions (929).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from polyvse_train.report.f8k_full import BASELINE, BEST, SEEDS, f8k_full_text

REPO = Path(__file__).resolve().parents[1]
SPEC = "configs/zoo/f8k-full.yaml"


def config_file(name: str) -> str:
    """The config file the zoo spec trains ``name`` from (configs/f8k-full/<...>.yaml)."""
    import yaml

    return yaml.safe_load((REPO / SPEC).read_text(encoding="utf-8"))["own_settings"][name]


def run_dir(runs: Path, name: str, seed: int) -> Path:
    return runs / name / f"official-s{seed}"


def data_root(given: str | None) -> str | None:
    """--data-root, else $POLYVSE_DATA, else the repo's .data (what `make data` fills), else polyvse's default."""
    if given or os.environ.get("POLYVSE_DATA"):
        return given or os.environ["POLYVSE_DATA"]
    return str(REPO / ".data") if (REPO / ".data").is_dir() else None


def train(runs: Path, jobs: int, polyvse: str, root: str | None = None) -> None:
    """`polyvse zoo run --jobs N` on the two configs (N workers share the plan, each claims the next run);
    a run that failed before is tried again."""
    cmd = [
        polyvse,
        "zoo",
        "run",
        "--spec",
        str(REPO / SPEC),
        "--configs",
        f"{BASELINE},{BEST}",
        "--out",
        str(runs),
        "--retry-failed",
        "--jobs",
        str(max(1, jobs)),
        *(["--data-root", root] if root else []),
    ]
    print("running:", " ".join(cmd), flush=True)
    if subprocess.run(cmd, cwd=REPO).returncode != 0:
        raise SystemExit("a training failed: see runs/zoo-f8k-full/<name>/official-s<seed>/error.json")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--runs",
        type=Path,
        default=REPO / "runs" / "zoo-f8k-full",
        help="the f8k-full zoo's run folder (default: %(default)s)",
    )
    p.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    p.add_argument("--jobs", type=int, default=1, help="trainings at a time (default: %(default)s)")
    p.add_argument("--data-root", help="data root (default: $POLYVSE_DATA, else the repo's .data if present)")
    p.add_argument("--no-train", action="store_true", help="only report runs that exist")
    p.add_argument(
        "--readme",
        action="store_true",
        help="then regenerate the docs' blocks from the committed records (`polyvse report`; copy the "
        "runs' records into results/zoo-f8k-full first: `polyvse zoo records`)",
    )
    args = p.parse_args(argv)
    polyvse = str(Path(sys.executable).with_name("polyvse"))
    if not args.no_train:
        train(args.runs, args.jobs, polyvse, data_root(args.data_root))
    files = {name: config_file(name) for name in (BASELINE, BEST)}
    print(f8k_full_text(args.runs, args.seeds, files))
    if args.readme:
        from polyvse_train.report import write_all

        for path in write_all(REPO):
            print(f"wrote {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
