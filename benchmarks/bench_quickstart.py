"""The quick start timed, as a new user meets it: install, `make demo` from an empty data root, then the search and
the server the demo's last lines name.

    python benchmarks/bench_quickstart.py [--out benchmarks/results/quickstart.json] [--venv DIR] [--no-setup]

Steps, each timed (wall and the CPU seconds of its processes) with the machine's load before and after it:

- ``setup``: ``python3.11 -m venv DIR`` and ``DIR/bin/pip install -c constraints.txt -e '.[dev]'`` into a new
  virtual environment (default: a new folder under /tmp), as `make setup` does. pip's download cache is not
  cleared: the record says how large it was, since a warm cache spares the downloads;
- ``demo``: `make demo` with ``POLYVSE_DATA`` a new, empty folder (so `make data` copies the data in, and the
  feature cache under it starts empty) and ``POLYVSE_CACHE`` unset, in this checkout's own .venv; it refuses when
  ``runs/demo`` exists (the demo would train into it): move that aside first;
- ``search``: the search the demo showed, run again in a new process exactly as it printed it;
- ``serve``: the `polyvse serve` command it printed, on a free port, until ``/api/health`` answers.

The record keeps the demo's own output from its index build on (the search it shows, the commands it prints), its
evaluation table, and each step's minutes; ``to_first_search_min`` adds setup, demo and search. Not a test: run it
on as quiet a machine as you have, since other jobs on the cores lengthen every step (``load_average``).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_make_model import run_logged  # noqa: E402
from run_all import REPO, machine_info, tree_state  # noqa: E402

from polyvse.util.atomic import write_json_atomic  # noqa: E402

#: where the demo's output turns from training to what a user reads next (polyvse_app.commands.demo)
SHOWN_FROM = "indexing the photos: "
SEARCH_LINE = "one search of it: "


def _cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(name: str, cmd: list[str], env: dict, cwd: Path) -> dict:
    """Run ``cmd``; its step record (command, seconds, CPU seconds, load before and after, log lines)."""
    load, cpu = list(os.getloadavg()), _cpu_children()
    print(f"\n== {name}: {shlex.join(cmd)}", flush=True)
    code, lines = run_logged(cmd, env, cwd)
    wall = lines[-1][0]
    step = {
        "command": shlex.join(cmd),
        "wall_s": wall,
        "minutes": round(wall / 60, 2),
        "cpu_s": round(_cpu_children() - cpu, 1),
        "load_average_before": load,
        "load_average_after": list(os.getloadavg()),
        "exit_code": code,
    }
    if code != 0:
        tail = "\n".join(line for _, line in lines[-30:])
        raise SystemExit(f"bench_quickstart: step {name} failed (exit {code}): {shlex.join(cmd)}\n{tail}")
    return {**step, "log": [line for _, line in lines]}


def demo_commands(lines: list[str]) -> tuple[list[str], list[str], list[str]]:
    """(the demo's output from its index build on, the argv of the search it showed, the argv of the serve command
    it printed), both argv without the program."""
    start = next((i for i, line in enumerate(lines) if line.startswith(SHOWN_FROM)), None)
    if start is None:
        raise SystemExit(f"bench_quickstart: the demo printed no {SHOWN_FROM!r} line; is this polyvse's demo?")
    shown = lines[start:]
    search = next(shlex.split(line[len(SEARCH_LINE) :])[1:] for line in shown if line.startswith(SEARCH_LINE))
    serve = next(
        shlex.split(line.split("    #")[0])[1:]
        for line in shown
        if line.strip().startswith("polyvse serve") or " serve --index " in line
    )
    while shown and not shown[-1].strip():
        shown.pop()
    return shown, search, serve


def time_serve(program: Path, argv: list[str], cwd: Path, workdir: Path) -> dict:
    """Seconds from starting the printed serve command (on a free port) to its first /api/health answer."""
    from polyvse_tooling.harness import free_port, start_serve, stop_serve, wait_until_up

    port = free_port()
    cmd = [str(program), *argv, "--port", str(port)]
    log_path = workdir / "serve.log"
    t0 = time.monotonic()
    with open(log_path, "w", encoding="utf-8") as log:
        proc = start_serve([*argv[1:], "--port", str(port)], log, cwd=cwd)
        try:
            wait_until_up(proc, f"http://127.0.0.1:{port}", 600, log_path)
            wall = round(time.monotonic() - t0, 1)
        finally:
            stop_serve(proc)
    return {
        "command": shlex.join(cmd),
        "wall_s": wall,
        "minutes": round(wall / 60, 2),
        "until": "GET /api/health answers 200",
    }


def pip_cache() -> dict:
    """pip's cache folder and its size: a warm cache means the setup step downloaded little or nothing."""
    out = subprocess.run([sys.executable, "-m", "pip", "cache", "dir"], capture_output=True, text=True, check=False)
    folder = Path(out.stdout.strip()) if out.returncode == 0 and out.stdout.strip() else None
    size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) if folder and folder.is_dir() else 0
    links = subprocess.run(
        [sys.executable, "-m", "pip", "config", "get", "global.find-links"], capture_output=True, text=True, check=False
    ).stdout.strip() or os.environ.get("PIP_FIND_LINKS")
    return {
        "dir": str(folder) if folder else None,
        "size_gb": round(size / 1e9, 2),
        "warm": size > 1e8,
        "find_links": links or None,
    }


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "quickstart.json")
    ap.add_argument(
        "--venv",
        type=Path,
        help="the new virtual environment of the setup step (must not exist; default: a new folder under the temp dir)",
    )
    ap.add_argument("--no-setup", action="store_true", help="skip the setup step (the record says so)")
    ap.add_argument("--python", default="python3.11", help="the Python of the setup step (default %(default)s)")
    ap.add_argument("--note", action="append", default=[], help="a note for the record (repeatable)")
    ap.add_argument("--demo-command", help=argparse.SUPPRESS)  # tests: a stand-in for `make demo`
    ap.add_argument("--repo", type=Path, default=REPO, help=argparse.SUPPRESS)  # tests: where it runs
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    args = parse(argv)
    demo_dir = args.repo / "runs" / "demo"
    if demo_dir.exists():
        raise SystemExit(
            f"bench_quickstart: {demo_dir} exists and the demo would train into it; move it aside "
            f"(e.g. mv runs/demo runs/demo.kept) and run again"
        )
    work = Path(tempfile.mkdtemp(prefix="polyvse-quickstart-"))
    env = {k: v for k, v in os.environ.items() if k not in ("POLYVSE_CACHE", "VIRTUAL_ENV")}
    info = {**machine_info(), **tree_state()}
    started = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    steps, cache = {}, pip_cache()
    if not args.no_setup:
        venv = args.venv or work / "venv"
        if venv.exists():
            raise SystemExit(f"bench_quickstart: {venv} exists; the setup step installs into a new environment")
        steps["setup"] = timed(
            "setup",
            [
                "bash",
                "-c",
                f"{shlex.quote(args.python)} -m venv {shlex.quote(str(venv))}"
                f" && {shlex.quote(str(venv))}/bin/pip install --quiet -c constraints.txt "
                "-e '.[dev]'",
            ],
            env,
            args.repo,
        )
    if not args.demo_command:  # the checkout's .venv up to date first, so the demo step times the demo alone
        subprocess.run(["make", "--quiet", "setup"], cwd=args.repo, env=env, check=True)
    data = work / "data"
    demo_cmd = shlex.split(args.demo_command) if args.demo_command else ["make", "demo", f"POLYVSE_DATA={data}"]
    steps["demo"] = timed("demo", demo_cmd, {**env, "POLYVSE_DATA": str(data)}, args.repo)
    shown, search, serve = demo_commands(steps["demo"]["log"])
    program = Path(sys.executable).parent / "polyvse"  # the demo's own: make demo runs .venv/bin/polyvse
    steps["search"] = timed("search", [str(program), *search], env, args.repo)
    steps["serve"] = time_serve(program, serve, args.repo, work)
    metrics_file = demo_dir / "metrics.json"
    metrics = json.loads(metrics_file.read_text()) if metrics_file.exists() else {}
    first = sum(steps[s]["wall_s"] for s in ("setup", "demo", "search") if s in steps)
    result = {
        "what": "the quick start from a fresh environment: install, make demo (empty data root and caches), the "
        "search the demo shows, the server it names",
        "started_utc": started,
        "steps": {k: {f: v for f, v in s.items() if f != "log"} for k, s in steps.items()},
        "to_first_search_min": round(first / 60, 2),
        "setup_included": "setup" in steps,
        "pip_cache": cache,
        "demo_output": shown,
        "search_output": steps["search"]["log"][:-1],
        "demo_metrics": {
            k: metrics.get(k) for k in ("dataset", "split", "seed", "wall_time_s", "cpu_time_s", "languages")
        },
        "notes": [
            "timed in the working checkout (a clone holds only committed files), its own .venv for the demo",
            f"pip's cache held {cache['size_gb']} GB ({cache['dir']})"
            + (
                f"; pip's find-links {cache['find_links']}: packages found there were not downloaded"
                if cache.get("find_links")
                else ""
            ),
            *args.note,
        ],
        "machine": info,
        "load_average_at_end": list(os.getloadavg()),
        "log": {k: s.get("log") for k, s in steps.items() if "log" in s},
    }
    from polyvse.provenance import checkpoint_model, no_model, provenance

    ck = demo_dir / "checkpoint"
    result["provenance"] = provenance(
        model=checkpoint_model(ck) if ck.is_dir() else no_model("the demo left no checkpoint")
    )
    result["data_root"] = str(data)  # kept: the demo's index names its photos there
    write_json_atomic(args.out, result)
    if "setup" in steps:
        shutil.rmtree(work / "venv", ignore_errors=True)
    print(
        f"\nquick start: setup {steps['setup']['minutes'] if 'setup' in steps else '-'} min, demo "
        f"{steps['demo']['minutes']} min, search {steps['search']['wall_s']} s, serve up in "
        f"{steps['serve']['wall_s']} s; {args.out}"
    )
    return result


if __name__ == "__main__":
    main()
