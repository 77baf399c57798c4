"""Regenerate the records of the product model on one build, in one run, so that every figure called the product
model's is of the checkpoint the build record names.

    python scripts/product_records.py --list                 # the steps, their commands and where each record goes
    python scripts/product_records.py --build                # make model timed from empty caches, then every record
    python scripts/product_records.py [--only languages,...] # the records, on the runs/model a build left

Each step runs its command on ``runs/model`` (the checkpoint and index `make model` leaves) and writes its record
under ``runs/records/`` first. Only when every step asked for has succeeded are the records moved to their
committed places (the build's training records into ``results/model-f8k-full-polyvse-best-s0/`` too), and `polyvse
report` renders the blocks again: a failure leaves every committed record as it was, and the tree stays clean while
the records are measured, as each record's provenance requires (the script refuses a dirty tree). Run it on a quiet
machine; `--build` takes as long as `make model` (benchmarks/results/make_model.json says how long).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORK = "runs/records"
MODEL = "runs/model"
CHECKPOINT = f"{MODEL}/checkpoint"
INDEX = f"{MODEL}/index"
#: the product build's own records, copied beside its training record (polyvse_train.report.product_build.PRODUCT_RUN)
RUN_FILES = {
    "metrics.json": f"{MODEL}/metrics.json",
    "train_log.jsonl": f"{MODEL}/train_log.jsonl",
    "build.json": f"{MODEL}/build.json",
    "adapted.json": f"{MODEL}/adapted.json",
    "training.json": f"{MODEL}/trained-checkpoint/training.json",  # the training's, before the adaptation stage
}
PRODUCT_RUN = "results/model-f8k-full-polyvse-best-s0"
SOAK_PHOTOS = 300  # photos `index add` brings in the middle of the soak


@dataclass(frozen=True)
class Step:
    name: str
    #: {file the command writes under the step's folder in runs/records: where it is committed}
    records: dict[str, str]
    #: the command, "{out}" standing for the step's folder in runs/records
    command: tuple[str, ...]
    needs_build: bool = True  # runs on runs/model


PY = "{python}"
STEPS = (
    Step(
        "build",
        {"make_model.json": "benchmarks/results/make_model.json"},
        (
            PY,
            "benchmarks/bench_make_model.py",
            "--threads",
            "2",
            "--precision",
            "fp32",
            "--out",
            "{out}/make_model.json",
        ),
        needs_build=False,
    ),
    Step(
        "languages",
        {"languages-model.json": "results/languages-model.json"},
        (
            PY,
            "scripts/language_table.py",
            "--checkpoint",
            CHECKPOINT,
            "--out",
            "{out}/languages-model.json",
            "--plan",
            "configs/adapt/product.yaml",
        ),
    ),  # fmt: skip
    Step(
        "crosslingual",
        {"model-crosslingual.json": "results/model-crosslingual.json"},
        (
            "{polyvse}",
            "evaluate",
            "--checkpoint",
            CHECKPOINT,
            "--task",
            "crosslingual",
            "--json",
            "{out}/model-crosslingual.json",
        ),
    ),  # fmt: skip
    Step(
        "serve-load",
        {"serve_load_product.json": "benchmarks/results/serve_load_product.json"},
        (
            PY,
            "benchmarks/bench_serve_load.py",
            "--index",
            INDEX,
            "--checkpoint",
            CHECKPOINT,
            "--clients",
            "4",
            "--duration",
            "30",
            "--out",
            "{out}/serve_load_product.json",
        ),
    ),  # fmt: skip
    Step(
        "query",
        {
            "latest.json": "benchmarks/results/query-product/latest.json",
            "latest.md": "benchmarks/results/query-product/latest.md",
        },
        (PY, "benchmarks/run_all.py", "--only", "cli_product", "--results-dir", "{out}"),
    ),  # fmt: skip
    Step(
        "soak",
        {"soak_product.json": "benchmarks/results/soak_product.json"},
        (
            PY,
            "benchmarks/bench_serve_load.py",
            "--index",
            "{out}/index",
            "--checkpoint",
            CHECKPOINT,
            "--duration",
            "600",
            "--clients",
            "8",
            "--add-images",
            "{out}/add",
            "--rss-every",
            "10",
            "--out",
            "{out}/soak_product.json",
        ),
    ),  # fmt: skip
    Step(
        "walkthrough",
        {"service.md": "docs/service.md", "service.outputs.json": "docs/templates/service.outputs.json"},
        (
            PY,
            "scripts/service_walkthrough.py",
            "--checkpoint",
            CHECKPOINT,
            "--out",
            "{out}/service.md",
            "--outputs",
            "{out}/service.outputs.json",
        ),
    ),  # fmt: skip
)


class RecordsError(Exception):
    pass


def git_dirty(repo: Path) -> list[str]:
    out = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True, check=True)
    return [line[3:] for line in out.stdout.splitlines()]


def command(step: Step, out: Path) -> list[str]:
    bin_dir = Path(sys.executable).parent
    words = {"python": sys.executable, "polyvse": str(bin_dir / "polyvse"), "out": str(out)}
    out_words = []
    for w in step.command:
        for key, value in words.items():
            w = w.replace("{" + key + "}", value)
        out_words.append(w)
    return out_words


def prepare(step: Step, repo: Path, out: Path, data_root: Path) -> None:
    """What a step needs beside runs/model: the soak adds photos to a copy of the index, not to the product's."""
    if step.name != "soak":
        return
    shutil.copytree(repo / INDEX, out / "index")
    photos = sorted((data_root / "flickr8k" / "images").glob("*.jpg"))[:SOAK_PHOTOS]
    if len(photos) < SOAK_PHOTOS:
        raise RecordsError(f"{data_root / 'flickr8k' / 'images'}: fewer than {SOAK_PHOTOS} photos; run `make data`")
    (out / "add").mkdir()
    for p in photos:
        shutil.copy2(p, out / "add" / p.name)


def run(steps: list[Step], repo: Path, data_root: Path, log=print) -> dict[str, str]:
    """Run ``steps`` in order, then move their records into place; {committed path: source} of what moved."""
    dirty = git_dirty(repo)
    if dirty:
        raise RecordsError(f"the tree has uncommitted changes ({', '.join(dirty[:5])}): commit them first")
    if any(s.needs_build for s in steps) and not any(s.name == "build" for s in steps):
        if not (repo / CHECKPOINT).is_dir() or not (repo / INDEX / "manifest.json").is_file():
            raise RecordsError(f"{repo / MODEL}: no product checkpoint and index; run with --build (or `make model`)")
    if any(s.name == "build" for s in steps) and (repo / MODEL).exists():
        raise RecordsError(f"{repo / MODEL} exists: move it aside for a build from empty caches, or drop --build")
    env = {**os.environ, "POLYVSE_DATA": str(data_root)}
    work = repo / WORK
    for step in steps:
        out = work / step.name
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        prepare(step, repo, out, data_root)
        cmd = command(step, out)
        log(f"[{step.name}] {' '.join(cmd)}")
        t0 = time.monotonic()
        with open(out / "step.log", "w", encoding="utf-8") as fh:
            rc = subprocess.run(cmd, cwd=repo, env=env, stdout=fh, stderr=subprocess.STDOUT, check=False).returncode
        log(f"[{step.name}] exit {rc}, {time.monotonic() - t0:.0f} s")
        if rc != 0:
            raise RecordsError(f"step {step.name} failed (exit {rc}); {out / 'step.log'} says why; nothing was moved")
        for name in step.records:
            if not (out / name).is_file():
                raise RecordsError(f"step {step.name} wrote no {out / name}; nothing was moved")
    moved = {}
    for step in steps:
        for name, dest in step.records.items():
            moved[dest] = str(work / step.name / name)
        if step.name == "build":
            moved.update({f"{PRODUCT_RUN}/{n}": str(repo / src) for n, src in RUN_FILES.items()})
    for dest, src in moved.items():
        (repo / dest).parent.mkdir(parents=True, exist_ok=True)
        tmp = repo / f"{dest}.tmp"
        shutil.copyfile(src, tmp)
        os.replace(tmp, repo / dest)
        log(f"moved {src} -> {dest}")
    return moved


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", action="store_true", help="time `make model` from empty caches first")
    ap.add_argument("--only", default="", help="comma-separated steps (default: all but build and soak)")
    ap.add_argument("--soak", action="store_true", help="also the 10-minute soak (with an `index add` halfway)")
    ap.add_argument("--list", action="store_true", help="print the steps and exit")
    ap.add_argument("--data-root", default=os.environ.get("POLYVSE_DATA", str(REPO / ".data")))
    args = ap.parse_args(argv)
    if args.list:
        for s in STEPS:
            print(f"{s.name}: {' '.join(s.command)}\n    -> {', '.join(s.records.values())}")
        return 0
    names = [n for n in args.only.split(",") if n] or [
        s.name for s in STEPS if s.name not in ("build", "soak") or getattr(args, s.name)
    ]
    unknown = sorted(set(names) - {s.name for s in STEPS})
    if unknown:
        print(f"product_records: no step {', '.join(unknown)}; --list names them", file=sys.stderr)
        return 2
    steps = [s for s in STEPS if s.name in names]
    try:
        run(steps, REPO, Path(args.data_root))
    except RecordsError as exc:
        print(f"product_records: {exc}", file=sys.stderr)
        return 1
    report = subprocess.run([str(Path(sys.executable).parent / "polyvse"), "report"], cwd=REPO, check=False)
    return report.returncode


if __name__ == "__main__":
    sys.exit(main())
