"""`make model` timed from empty caches, as on a fresh machine (the goal: under 90 minutes on 2 cores).

    python benchmarks/bench_make_model.py --threads 2 [--precision fp32] [--out benchmarks/results/make_model.json]

Runs `make model MODEL_THREADS=<threads> MODEL_PRECISION=<precision>` in this checkout with ``POLYVSE_CACHE``
pointing at a new, empty folder, so every photo map and sentence vector the target needs is computed, not read
back (the data copy under the data root is kept: it is `make data`'s, not the model's). It refuses when ``runs/model`` exists, since the target would
resume that run instead of training one: move it aside first. Written on success:

- ``wall_s``: the whole target, against the goal (``goal_s``, 90 minutes);
- ``stages``: the seconds between the stages' starts in the log (setup and data, training, the index build, the
  adaptation stage teaching es, ar, qu, gn: `polyvse model build` prints each);
- ``logged``: what the training's own log says each step took (photo maps extracted, sentences embedded per
  encoder and language, each epoch) and their sums, so the cost of empty caches reads apart from the epochs';
- the training's own ``wall_time_s`` / ``cpu_time_s`` (``runs/model/metrics.json``), the machine, its load
  before and after (``load_average``: another job on the cores lengthens everything), and the checkout
  (``git_commit``, ``git_dirty``: a record for README comes from a clean tree).

The log, each line with its second since the start, is in ``log``. Run it on a quiet machine; not a test.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run_all import REPO, machine_info, tree_state  # noqa: E402

from polyvse.util.atomic import write_json_atomic  # noqa: E402

GOAL_S = 90 * 60
# "<what>: <details>, <seconds> s" as the training logs its extraction, embedding and epochs
_TIMED = re.compile(r"^(?P<what>.+?): (?P<detail>.*?),? (?P<s>\d+(?:\.\d+)?) s$")
# where each stage starts: the commands make echoes, or `polyvse model build`'s stage lines ("[3/3] adapt: ...")
_STAGES = (
    ("training", re.compile(r"\bpolyvse train\b")),
    ("index", re.compile(r"\bpolyvse index build\b")),
    ("adaptation", re.compile(r"\bscripts/adapt_model\.py\b|^\[\d+/\d+\] adapt: ")),
)


def run_logged(cmd: list[str], env: dict, cwd: Path) -> tuple[int, list[tuple[float, str]]]:
    """(exit code, [(seconds since the start, line)]) of ``cmd``, its output echoed as it comes."""
    start, lines = time.monotonic(), []
    with subprocess.Popen(
        cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    ) as proc:
        for line in proc.stdout:
            # a progress bar's redraws arrive as one line of carriage returns: its last state is what counts
            lines.append((round(time.monotonic() - start, 1), line.rstrip("\n").rsplit("\r", 1)[-1]))
            print(line, end="", flush=True)
    lines.append((round(time.monotonic() - start, 1), ""))  # the end
    return proc.returncode, lines


def stages(lines: list[tuple[float, str]]) -> dict[str, float]:
    """Seconds of each stage, split where make echoes the stage's command: 'before_training' (setup, data),
    'training', 'index', 'adaptation'; a stage the log never reaches is absent."""
    starts = {"before_training": 0.0}
    for t, line in lines:
        for name, pattern in _STAGES:
            if name not in starts and pattern.search(line) and not _TIMED.match(line):
                starts[name] = t
    end = lines[-1][0] if lines else 0.0
    order = sorted(starts.items(), key=lambda kv: kv[1])
    return {name: round((order[i + 1][1] if i + 1 < len(order) else end) - t, 1) for i, (name, t) in enumerate(order)}


def logged_steps(lines: list[tuple[float, str]]) -> dict:
    """The training log's own timings: each timed line, and the sums for photo maps, sentence vectors, epochs."""
    steps, sums = [], {"photo_maps_s": 0.0, "sentence_vectors_s": 0.0, "epochs_s": 0.0}
    for _, line in lines:
        m = _TIMED.match(line.strip())
        if not m:
            continue
        what, seconds = m.group("what").strip(), float(m.group("s"))
        kind = (
            "epochs_s"
            if what.startswith("epoch ")
            else "photo_maps_s"
            if what.startswith("extracting ")
            else "sentence_vectors_s"
            if "sentences" in m.group("detail")
            else None
        )
        if kind:
            sums[kind] += seconds
        steps.append({"what": what, "detail": m.group("detail"), "seconds": seconds})
    return {**{k: round(v, 1) for k, v in sums.items()}, "steps": steps}


def fresh_cache(root: Path | None, repo: Path) -> Path:
    """An empty cache folder: ``root`` if given (it must be empty or absent), else a new one under runs/."""
    path = root or repo / "runs" / f"bench-make-model-cache-{time.strftime('%Y%m%d-%H%M%S')}"
    if path.exists() and any(path.iterdir()):
        raise SystemExit(
            f"bench_make_model: {path} is not empty; give an empty or new --cache-root (the point is "
            "to time the target from empty caches)"
        )
    path.mkdir(parents=True, exist_ok=True)
    return path


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2, help="MODEL_THREADS for the target (default %(default)s)")
    ap.add_argument(
        "--precision",
        default="fp32",
        choices=["auto", "fp32", "bf16"],
        help="MODEL_PRECISION for the target (default %(default)s, the product's; auto: bf16 where the machine "
        "computes it natively); the record keeps what the training resolved it to",
    )
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "make_model.json")
    ap.add_argument("--cache-root", type=Path, help="the empty cache folder to use (default: a new one under runs/)")
    ap.add_argument("--command", help=argparse.SUPPRESS)  # tests: a stand-in for `make model`
    ap.add_argument("--repo", type=Path, default=REPO, help=argparse.SUPPRESS)  # tests: where it runs
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    args = parse(argv)
    model_dir = args.repo / "runs" / "model"
    if model_dir.exists():
        raise SystemExit(
            f"bench_make_model: {model_dir} exists and `make model` would resume it; move it aside "
            f"(e.g. mv runs/model runs/model.kept) and run again"
        )
    cache = fresh_cache(args.cache_root, args.repo)
    cmd = (
        args.command.split()
        if args.command
        else ["make", "model", f"MODEL_THREADS={args.threads}", f"MODEL_PRECISION={args.precision}"]
    )
    env = {**os.environ, "POLYVSE_CACHE": str(cache)}
    info = {**machine_info(), **tree_state()}
    started = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    code, lines = run_logged(cmd, env, args.repo)
    if code != 0:
        raise SystemExit(
            f"bench_make_model: `{' '.join(cmd)}` failed with exit code {code}; nothing written (the "
            f"caches it filled stay in {cache})"
        )
    metrics_file = model_dir / "metrics.json"
    metrics = json.loads(metrics_file.read_text()) if metrics_file.exists() else {}
    build_file = model_dir / "build.json"  # `polyvse model build`'s own record: the trained checkpoint's fingerprint
    build = json.loads(build_file.read_text()) if build_file.exists() else {}
    wall = lines[-1][0]
    result = {
        "target": " ".join(cmd),
        "threads": args.threads,
        "precision": {"asked": args.precision, "trained": metrics.get("precision")},
        "started_utc": started,
        "wall_s": wall,
        "goal_s": GOAL_S,
        "within_goal": wall <= GOAL_S,
        "stages": stages(lines),
        "logged": logged_steps(lines),
        "training": {
            k: metrics.get(k) for k in ("wall_time_s", "cpu_time_s", "n_train_captions", "processes", "time_complete")
        },
        "fingerprints": build.get("fingerprints"),
        "cache_root_empty_at_start": str(cache),
        "load_average_at_end": list(os.getloadavg()),
        "machine": info,
        "log": [[t, line] for t, line in lines],
    }
    from polyvse.provenance import checkpoint_model, no_model, provenance

    result["provenance"] = provenance(
        model=checkpoint_model(model_dir / "checkpoint")
        if (model_dir / "checkpoint").is_dir()
        else no_model(f"`{' '.join(cmd)}` left no checkpoint in {model_dir}")
    )
    write_json_atomic(args.out, result)
    print(
        f"make model: {wall / 60:.1f} min ({'within' if result['within_goal'] else 'over'} the 90-minute goal); "
        f"{args.out}"
    )
    return result


if __name__ == "__main__":
    main()
