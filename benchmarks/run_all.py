"""Run every benchmark (the `make bench` entry) and write benchmarks/results/latest.json + latest.md.

    python benchmarks/run_all.py [--results-dir benchmarks/results] [--budget-s SECONDS] [--quick]

Each benchmark runs as a child process of this one, one after the other (they would distort each
other's timings if run together), with a timeout that keeps the whole run inside ``--budget-s``:

    bench_train.py    training throughput vs the bare-kernel bound  -> train_throughput_ratio (if present)
    bench_eval.py     evaluator, 5k images x 25k captions             -> eval_5k_seconds
    bench_extract.py  photo feature extraction on real photos          -> extract_photos_per_s
    bench_search.py   exact scan vs FAISS IVF/HNSW over 1M vectors     -> exact_scan_bandwidth_fraction,
                                                                          ann_p50_ms, ann_recall_at_10
    bench_gpu.py      on a CUDA GPU only (else skipped, saying so): extraction photos/s, training vs the
                      bare-kernel bound on the GPU, exact and IVF search over 10M vectors -> gpu_* keys
    bench_cli_startup.py  one `polyvse search` text query, fresh process -> cli_search_s (needs the demo
                          index runs/demo/index; without it the key stays null with a note); the same with
                          --product on the product model's index runs/model/index (frozen e5 + USE towers, from
                          `make model`) -> cli_search_product_s
    bench_milvus.py   FAISS against embedded milvus-lite side by side at 1M vectors drawn around the product model's
                      photo embeddings (Gaussian without runs/model/index) -> {faiss,milvus}_1m_{build_s,recall_at_10,
                      p50_ms,p99_ms}; with its own budget (MILVUS_BUDGET_S)
    bench_scale.py    the compressed index (--max-memory 8GB) at 100k, 1M and 10M vectors around the product model's
                      photo embeddings, and Gaussian at 100k and 1M, searched as the product model's text queries are
                      (CSLS re-ranking, the index storing the en bank's penalties: --penalty-langs en, as `polyvse
                      index build --csls-penalty-langs en`) -> scale_<size>_{rss_gb,build_peak_rss_gb,recall_at_10,
                      p50_ms,p99_ms,build_s,disk_gb}; last, with its own budget (SCALE_BUDGET_S)

Budget. The default ``--budget-s`` is the sum of three parts, so that every step has room: 1200 s for the steps
before milvus (2400 s where a GPU adds bench_gpu.py), MILVUS_BUDGET_S and SCALE_BUDGET_S (each also that step's
own timeout; a part is left out with its step, by --only or --quick). The results record what each step took
(``step_seconds``); the budgets leave room over those of the committed record for a loaded machine.

A benchmark that is missing, fails or times out leaves its keys null with a note saying why; the
others still run and the results are still written (atomically: temp file + rename), and the exit
status is then 1. ``--quick`` runs every benchmark at tiny sizes (seconds, for the smoke test) and
should be pointed at another ``--results-dir``. Not a test.

Disk. The scale step builds indexes of up to 10M vectors in the temp folder (one at a time). Before the first step,
``bench_scale.py --check-disk`` checks that the largest fits there; where it does not, the run refuses to start
(exit status 2), saying how much room it needs and how much is free, rather than fail at its last step.

A run that failed at one step (the disk filled, a step timed out) need not run every step again: rerun that step
alone (``--only scale --results-dir DIR``) on the same commit and machine, then ``--merge FIRST DIR/latest.json``
writes one record, the second run's steps replacing the first's; the record and both pages say which steps came
from which run, and it refuses two runs of different commits, machines, versions or product models.

The results name the commit they measured (``git_commit``, full hash). A tree with uncommitted changes to
tracked files measures code that no commit holds, so the run refuses to start on one (exit status 2, naming
the files); ``--allow-dirty`` runs anyway and marks the results ``git_dirty: true`` at the top of both files.
The tree is checked again at the end (a change during the run also marks them dirty).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from polyvse_train.report.bench_page import bench_page, fmt

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

HEADLINE = {  # key -> (target as text, predicate on the value or None)
    "train_throughput_ratio": (">= 0.9", lambda v: v >= 0.9),
    "exact_scan_bandwidth_fraction": (">= 0.8", lambda v: v >= 0.8),
    "ann_p50_ms": ("< 10 ms (at recall@10 >= 0.95)", lambda v: v < 10),
    "ann_recall_at_10": (">= 0.95", lambda v: v >= 0.95),
    "extract_photos_per_s": ("(measured)", None),
    "eval_5k_seconds": ("(measured)", None),
    "gpu_extract_photos_per_s": ("(measured, GPU)", None),
    "gpu_train_throughput_ratio": ("(measured, GPU)", None),
    "gpu_exact_10m_p50_ms": ("(measured, GPU)", None),
    "gpu_ivf_10m_p50_ms": ("(measured, GPU, recall@10 >= 0.95)", None),
    "cli_search_s": ("about 1 s", lambda v: v <= 1.5),
    "cli_search_product_s": ("< 0.5 s", lambda v: v < 0.5),
    "scale_10m_rss_gb": ("<= 8 GB", lambda v: v <= 8),
    "scale_10m_build_peak_rss_gb": ("<= 8 GB, building under --max-memory 8GB", lambda v: v <= 8),
    "scale_10m_recall_at_10": (">= 0.95 (CSLS)", lambda v: v >= 0.95),
    "scale_10m_p50_ms": ("<= 10 ms, one thread, CSLS re-ranking included", lambda v: v <= 10),
}
SCALE_KEYS = [k for k in HEADLINE if k.startswith("scale_")]
# the budgets of the two long steps (their timeouts too), on top of the others' 1200 s
MILVUS_BUDGET_S = 3600  # bench_milvus.py at 1M: FAISS and milvus-lite builds, each tuning nprobe
SCALE_BUDGET_S = 5400  # bench_scale.py: photos at 100k, 1M, 10M, Gaussian at 100k, 1M, the en bank's CSLS penalties
GPU_KEYS = [k for k in HEADLINE if k.startswith("gpu_")]
DEMO_INDEX = REPO / "runs" / "demo" / "index"
PRODUCT_INDEX = REPO / "runs" / "model" / "index"


def log(msg: str) -> None:
    print(f"[run_all {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# -- machine description -----------------------------------------------------------------------------------
def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _meminfo_gib(field: str) -> float | None:
    m = re.search(rf"^{field}:\s+(\d+) kB", _read("/proc/meminfo"), re.M)
    return round(int(m.group(1)) / 2**20, 2) if m else None


def tree_state() -> dict:
    """The commit checked out and the tracked files with uncommitted changes (untracked files do not count), as
    polyvse.provenance.git_state sees them."""
    from polyvse.provenance import git_state

    state = git_state(REPO)
    return {"git_commit": state["commit"], "git_dirty": state["dirty"], "git_changed_files": state["dirty_files"]}


def _numpy_blas() -> str:
    import numpy as np

    try:
        cfg = np.show_config(mode="dicts")
        blas = cfg["Build Dependencies"]["blas"]
        return f"{blas.get('name')} {blas.get('version')}"
    except Exception:  # noqa: BLE001 - older numpy: no dict mode
        return "unknown"


def _openblas_threads(owner: str) -> int | None:
    """Threads of the OpenBLAS bundled with ``owner`` ("numpy" or "faiss_cpu"), read from the library itself."""
    import ctypes

    import faiss  # noqa: F401 - loads the libraries
    import numpy as np  # noqa: F401

    for line in _read(f"/proc/{os.getpid()}/maps").splitlines():
        lib_path = line.split()[-1] if line.split() else ""
        if f"/{owner}.libs/" in lib_path and "openblas" in lib_path.lower() and ".so" in lib_path:
            try:
                lib = ctypes.CDLL(lib_path)
            except OSError:
                continue
            for sym in ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_", "openblas_get_num_threads"):
                fn = getattr(lib, sym, None)
                if fn is not None:
                    return int(fn())
    return None


def machine_info() -> dict:
    """The machine as every record names it (polyvse.provenance.machine), under the names latest.json has always
    used, plus what a timing needs beside it: CPU flags, usable cores, free memory and load at the start, the
    libraries' BLAS builds and thread counts."""
    import faiss
    import numpy as np
    import torch

    from polyvse.provenance import machine

    base = machine()
    torch_cfg = torch.__config__.show()
    blas = re.search(r"BLAS_INFO=(\w+)", torch_cfg)
    mkl = re.search(r"Math Kernel Library Version ([\w.\-]+)", torch_cfg)
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        affinity = None
    return {
        "date_utc": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "cpu_model": base["cpu"],
        "cpu_flags_of_note": [
            f
            for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")
            if re.search(rf"\b{f}\b", _read("/proc/cpuinfo"))
        ],
        "cores": base["cores"],
        "cores_usable": affinity,
        "memory_gib": base["memory_gb"],
        "memory_available_gib_at_start": _meminfo_gib("MemAvailable"),
        "load_average_at_start": list(os.getloadavg()),
        "os": base["os"],
        "python": base["python"],
        "torch": torch.__version__,
        "numpy": np.__version__,
        "faiss": faiss.__version__,
        "torch_blas": (blas.group(1) if blas else "unknown") + (f" {mkl.group(1)}" if mkl else ""),
        "numpy_blas": _numpy_blas(),
        "faiss_compile_options": faiss.get_compile_options().strip(),
        "threads": {
            "torch": torch.get_num_threads(),
            "torch_interop": torch.get_num_interop_threads(),
            "faiss_omp": faiss.omp_get_max_threads(),
            "numpy_openblas": _openblas_threads("numpy"),
            "faiss_openblas": _openblas_threads("faiss_cpu"),
            "env": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")},
        },
        "gpu": base["gpu"],
        **tree_state(),
    }


# -- running one benchmark -------------------------------------------------------------------------------------
# the keys of the results each step writes, by prefix (or whole name): what --merge takes from the later run
STEP_KEYS = {
    "eval": ("eval_",),
    "extract": ("extract_",),
    "search": ("exact_scan_", "ann_"),
    "train": ("train_", "mule_"),
    "gpu": ("gpu_",),
    "cli": ("cli_search_s",),
    "cli_product": ("cli_search_product_s",),
    "milvus": ("milvus_", "faiss_"),
    "scale": ("scale_",),
}
# what two runs must share for one record to hold figures of both
SAME_RUN_FIELDS = ("cpu_model", "cores", "memory_gib", "os", "python", "torch", "numpy", "faiss", "gpu")


def _step_of(key: str) -> str | None:
    return next((step for step, keys in STEP_KEYS.items() if key.startswith(keys)), None)


def merge_records(earlier: dict, later: dict, names: tuple[str, str] = ("earlier", "later")) -> dict:
    """One record from two full runs at the same commit on the same machine: the steps the later one ran (its
    ``step_seconds``) replace the earlier's, every other step is the earlier's. For a run that failed at a step
    (the disk filled, a timeout): rerun that step alone (``--only``) and merge, instead of every step again.
    Raises ValueError naming what differs where the two cannot stand as one run."""
    problems = []
    for label, r in zip(names, (earlier, later)):
        if r.get("quick"):
            problems.append(f"{label} is a --quick run")
        if r.get("git_dirty") or not r.get("git_commit"):
            problems.append(f"{label} names no clean commit")
    if earlier.get("git_commit") != later.get("git_commit"):
        problems.append(f"the commits differ ({earlier.get('git_commit')} and {later.get('git_commit')})")
    for field in SAME_RUN_FIELDS:
        if earlier["machine"].get(field) != later["machine"].get(field):
            problems.append(
                f"machine.{field} differs ({earlier['machine'].get(field)!r}, {later['machine'].get(field)!r})"
            )
    if earlier["provenance"].get("model") != later["provenance"].get("model"):
        problems.append("they measured different product models (provenance.model)")
    steps = sorted(later.get("step_seconds", {}), key=list(STEP_KEYS).index)
    unknown = [s for s in steps if s not in STEP_KEYS]
    if unknown or not steps:
        problems.append(f"{names[1]} ran no step to merge" if not steps else f"unknown steps {unknown}")
    if problems:
        raise ValueError("cannot merge " + " and ".join(names) + ": " + "; ".join(problems))
    merged = json.loads(json.dumps(earlier))
    taken = set(steps)
    merged["notes"] = {k: v for k, v in earlier["notes"].items() if _step_of(k) not in taken}
    merged["notes"].update({k: v for k, v in later["notes"].items() if _step_of(k) in taken})
    for key in [k for k in merged if _step_of(k) in taken]:
        del merged[key]
    merged.update({k: v for k, v in later.items() if _step_of(k) in taken})
    for part in ("details", "step_seconds"):
        merged[part] = {k: v for k, v in earlier[part].items() if k not in taken}
        merged[part].update({k: v for k, v in later[part].items() if k in taken})
    merged["load_average_at_end"] = later["load_average_at_end"]
    merged["wall_s"] = earlier["wall_s"] + later["wall_s"]
    merged["merged"] = {
        "steps": steps,
        "runs": [
            {
                "record": name,
                "steps": [s for s in r["step_seconds"] if (s in taken) == (r is later)],
                "date_utc": r["machine"]["date_utc"],
                "load_average_at_start": r["machine"]["load_average_at_start"],
                "load_average_at_end": r["load_average_at_end"],
                "wall_s": r["wall_s"],
                "notes_replaced": {k: v for k, v in r["notes"].items() if _step_of(k) in taken} if r is earlier else {},
            }
            for name, r in zip(names, (earlier, later))
        ],
    }
    return merged


def check_scale_disk(argv: list[str]) -> str | None:
    """bench_scale.py's disk check for the runs ``argv`` would make: None when its largest index fits, else
    the reason it does not."""
    with tempfile.TemporaryDirectory(prefix="polyvse-bench-disk-") as tmp:
        cmd = [sys.executable, *argv, "--check-disk", "--out", str(Path(tmp) / "out.json")]
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if proc.returncode == 0:
        log(proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else "scale: disk checked")
        return None
    return (
        proc.stderr.strip().splitlines()[-1]
        if proc.stderr.strip()
        else f"bench_scale.py --check-disk: {proc.returncode}"
    )


def run_step(name: str, argv: list[str], timeout_s: float) -> tuple[dict | None, str | None, float]:
    """Run a benchmark script (output streamed through), return (its JSON, error note, seconds); a script that
    timed out after writing part of its JSON (bench_scale.py writes after each size) returns that part."""
    out = Path(tempfile.mkdtemp(prefix=f"polyvse-bench-{name}-")) / "out.json"
    cmd = [sys.executable, *argv, "--out", str(out)]
    log(f"{name}: {' '.join(cmd[1:])} (timeout {timeout_s:.0f}s)")
    t0 = time.perf_counter()
    if timeout_s <= 5:
        return None, "skipped: the run's time budget was used up", 0.0
    env = dict(os.environ)
    if "POLYVSE_DATA" not in env and (REPO / ".data").is_dir():
        env["POLYVSE_DATA"] = str(REPO / ".data")  # what the Makefile exports (bench_train.py reads it)
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, start_new_session=True)  # own process group: killable as a whole
    try:
        rc = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        try:
            return _take_json(out), f"timed out after {timeout_s:.0f}s", time.perf_counter() - t0
        except (OSError, ValueError):
            return None, f"timed out after {timeout_s:.0f}s", time.perf_counter() - t0
    except BaseException:
        _kill_group(proc)
        raise
    dt = time.perf_counter() - t0
    if rc != 0:
        return None, f"exited with status {rc} after {dt:.0f}s (see its output above)", dt
    try:
        data = _take_json(out)
    except (OSError, ValueError) as exc:
        return None, f"wrote no readable JSON ({exc})", dt
    log(f"{name}: done in {dt:.0f}s")
    return data, None, dt


def _take_json(out: Path) -> dict:
    """A step's JSON, its temporary folder removed whether or not it reads."""
    try:
        return json.loads(out.read_text())
    finally:
        try:
            out.unlink()
            out.parent.rmdir()
        except OSError:
            pass


def _kill_group(proc: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)  # the group this run created for the child (it and its DataLoader workers)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=10)
            return
        except subprocess.TimeoutExpired:
            continue


def _supports_quick(script: Path) -> bool:
    try:
        return "--quick" in script.read_text(errors="replace")
    except OSError:
        return False


# -- report ----------------------------------------------------------------------------------------------------------
def write_atomic(path: Path, text: str) -> None:
    from polyvse.util.atomic import atomic_open

    with atomic_open(path, "w", suffix=".tmp") as fh:
        fh.write(text)


def gpu_results(data: dict) -> dict:
    """The gpu_* headline values from bench_gpu.py's JSON (fp32 runs: the defaults)."""
    ivf = data["search"]["ivf"].get("cheapest_at_target") or {}
    return {
        "gpu_extract_photos_per_s": data["extract"]["fp32"]["end_to_end_photos_per_s"],
        "gpu_train_throughput_ratio": data["train"]["fp32"]["train_throughput_ratio"],
        "gpu_exact_10m_p50_ms": data["search"]["exact_torch_single"]["p50_ms"],
        "gpu_ivf_10m_p50_ms": ivf.get("p50_ms"),
    }


# -- main ---------------------------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results-dir", type=Path, default=HERE / "results")
    ap.add_argument(
        "--budget-s",
        type=float,
        default=None,
        help="time budget for the whole run (default 1200 s, 2400 s where a GPU adds bench_gpu.py, plus "
        f"{MILVUS_BUDGET_S} s for bench_milvus.py and {SCALE_BUDGET_S} s for bench_scale.py)",
    )
    ap.add_argument("--quick", action="store_true", help="tiny sizes for every benchmark (smoke test)")
    ap.add_argument(
        "--only", default="", help="comma-separated subset of: train,eval,extract,search,gpu,cli,cli_product,scale"
    )
    ap.add_argument(
        "--allow-dirty",
        action="store_true",
        help="run on a tree with uncommitted changes to tracked files (the results say git_dirty: true)",
    )
    ap.add_argument(
        "--readme",
        action="store_true",
        help="run nothing: regenerate every generated block of README and docs from the committed "
        "records, the Performance block from benchmarks/results/latest.json among them (`polyvse "
        "report`)",
    )
    ap.add_argument(
        "--merge",
        nargs=2,
        type=Path,
        metavar=("EARLIER", "LATER"),
        help="run nothing: write the results dir's latest.json and latest.md from two records of one commit on one "
        "machine, the steps LATER ran (e.g. one rerun with --only) replacing EARLIER's",
    )
    args = ap.parse_args(argv)
    if args.merge:
        return write_merged(*args.merge, args.results_dir)
    if args.readme:
        from polyvse_train.report import write_all

        for path in write_all(REPO):
            log(f"wrote {path}")
        return 0
    tree = tree_state()
    if tree["git_commit"] is None and not args.allow_dirty:
        print(
            f"run_all: refusing to benchmark: {REPO} is not a git checkout (or git is missing), so no commit would "
            "name the code measured; run in a clone, or pass --allow-dirty.",
            file=sys.stderr,
        )
        return 2
    if tree["git_dirty"] and not args.allow_dirty:
        print(
            f"run_all: refusing to benchmark a dirty tree: uncommitted changes to {', '.join(tree['git_changed_files'])} "
            f"on top of {tree['git_commit']}; results must name a commit that reproduces them. Commit (or run in a "
            "clean clone), or pass --allow-dirty to mark the results dirty.",
            file=sys.stderr,
        )
        return 2
    if tree["git_dirty"]:
        log(f"WARNING: dirty tree ({', '.join(tree['git_changed_files'])}): the results will say git_dirty: true")
    t_start = time.perf_counter()
    machine = machine_info()
    only = {s for s in args.only.split(",") if s}
    own = sum(
        b
        for name, b in (("milvus", MILVUS_BUDGET_S), ("scale", SCALE_BUDGET_S))
        if not args.quick and (not only or name in only)
    )  # the long steps' budgets, when they run
    budget = args.budget_s or (2400.0 if machine["gpu"] else 1200.0) + own
    deadline = t_start + budget
    log(
        f"{machine['cpu_model']}, {machine['cores']} cores, {machine['memory_gib']} GiB, load "
        f"{machine['load_average_at_start']}, GPU {machine['gpu'] or 'none'}; budget {budget:.0f}s"
    )

    q = ["--quick"] if args.quick else []
    train_script = HERE / "bench_train.py"
    scale_argv = [str(HERE / "bench_scale.py"), "--penalty-langs", "en"] + q
    if not only or "scale" in only:
        refused = check_scale_disk(scale_argv)  # the last step: found out now, not after the others have run
        if refused:
            print(f"run_all: refusing to benchmark: {refused}", file=sys.stderr)
            return 2
    # (name, script argv, cap on its own time); the order keeps the long search last but one
    steps = [
        ("eval", [str(HERE / "bench_eval.py")] + (["--images", "200", "--repeats", "1"] if args.quick else []), 240),
        ("extract", [str(HERE / "bench_extract.py")] + q, 330),
        ("search", [str(HERE / "bench_search.py")] + q, 720),
        ("train", [str(train_script)] + (q if args.quick and _supports_quick(train_script) else []), 600),
        ("gpu", [str(HERE / "bench_gpu.py")] + q, 1200),  # writes only a "skipped" line without a GPU
        ("cli", [str(HERE / "bench_cli_startup.py"), "--index", str(DEMO_INDEX)] + q, 240),
        ("cli_product", [str(HERE / "bench_cli_startup.py"), "--product", "--index", str(PRODUCT_INDEX)] + q, 300),
        ("milvus", [str(HERE / "bench_milvus.py")] + q, MILVUS_BUDGET_S if not args.quick else 600),  # milvus_1m_*
        # the index stores the penalties of the queries' language (en) only: every bank's multiplies that pass by
        # the number of banks (`bench_scale.py --sizes 10m --data photos` without --penalty-langs measures it alone)
        ("scale", scale_argv, SCALE_BUDGET_S if not args.quick else 600),
    ]
    results: dict = {k: None for k in HEADLINE}
    notes: dict = {}
    details: dict = {}
    step_seconds: dict = {}
    failed = False
    for name, argv_, cap in steps:
        if only and name not in only:
            continue
        if name == "train":
            if not train_script.exists():
                notes["train_throughput_ratio"] = "benchmarks/bench_train.py is not present: training not measured"
                log(notes["train_throughput_ratio"])
                continue
            if args.quick and not _supports_quick(train_script):
                notes["train_throughput_ratio"] = "bench_train.py has no --quick mode: skipped in quick runs"
                continue
        if name == "cli" and not args.quick and not (DEMO_INDEX / "manifest.json").is_file():
            notes["cli_search_s"] = (
                f"no demo index at {DEMO_INDEX.relative_to(REPO)}: not measured (make demo, then "
                "polyvse index build --checkpoint runs/demo/checkpoint --images "
                "$POLYVSE_DATA/flickr8k/images --out runs/demo/index)"
            )
            log(notes["cli_search_s"])
            continue
        if name == "cli_product" and not args.quick and not (PRODUCT_INDEX / "manifest.json").is_file():
            notes["cli_search_product_s"] = (
                f"no product index at {PRODUCT_INDEX.relative_to(REPO)}: not measured (make model builds it)"
            )
            log(notes["cli_search_product_s"])
            continue
        data, err, dt = run_step(name, argv_, min(cap, deadline - time.perf_counter()))
        step_seconds[name] = dt
        if err:
            failed = True
            keys = {
                "eval": ["eval_5k_seconds"],
                "extract": ["extract_photos_per_s"],
                "train": ["train_throughput_ratio"],
                "search": ["exact_scan_bandwidth_fraction", "ann_p50_ms", "ann_recall_at_10"],
                "gpu": GPU_KEYS,
                "cli": ["cli_search_s"],
                "cli_product": ["cli_search_product_s"],
                "scale": SCALE_KEYS,
                "milvus": ["milvus_1m_build_s", "faiss_1m_build_s"],
            }[name]
            for k in keys:
                notes[k] = f"{Path(argv_[0]).name} {err}"
            log(f"{name}: {err}")
            if data is None or name != "scale":
                continue
            log(f"{name}: keeping the sizes it finished before it stopped")
        details[name] = data
        if name == "eval":
            results["eval_5k_seconds"] = data.get("median_s")
            if args.quick:
                notes["eval_5k_seconds"] = f"quick run: {data.get('n_images')} images, not 5k"
        elif name == "extract":
            results["extract_photos_per_s"] = data.get("extract_photos_per_s")
        elif name == "cli":
            results["cli_search_s"] = data.get("cli_search_s")
        elif name == "cli_product":
            results["cli_search_product_s"] = data.get("cli_search_s")
        elif name == "scale":
            results.update({k: v for k, v in data.items() if k.startswith("scale_")})
            stopped = [f"{Path(argv_[0]).name} {err}: the sizes it finished"] if err else []
            notes.update({k: "; ".join(stopped + data["notes"]) for k in SCALE_KEYS if stopped or data.get("notes")})
        elif name == "milvus":
            results.update({k: v for k, v in data.items() if k.startswith(("milvus_", "faiss_"))})
        elif name == "search":
            for k in ("exact_scan_bandwidth_fraction", "ann_p50_ms", "ann_recall_at_10"):
                results[k] = data.get(k)
            results["ann_setting"] = data.get("ann_setting")
            if data.get("ann_p50_ms") is None:
                notes["ann_p50_ms"] = data.get("ann_setting")
        elif name == "gpu":
            if "skipped" in data:
                log(data["skipped"])
                notes.update({k: data["skipped"] for k in GPU_KEYS})
            else:
                results.update(gpu_results(data))
        elif name == "train":
            # every top-level scalar of bench_train.py's JSON is lifted (e.g. train_throughput_ratio)
            for k, v in data.items():
                if (v is None or isinstance(v, (int, float, str, bool))) and (k not in results or results[k] is None):
                    results[k] = v
            if results.get("train_throughput_ratio") is None:
                notes.setdefault("train_throughput_ratio", "bench_train.py wrote no train_throughput_ratio")

    end = tree_state()  # a change during the run (a commit, an edit) also makes the results dirty
    dirty_files = sorted(set(machine["git_changed_files"] or []) | set(end["git_changed_files"] or []))
    if end["git_commit"] != machine["git_commit"]:
        dirty_files.append(f"(HEAD moved to {end['git_commit']} during the run)")
    if machine["git_commit"] is None:
        dirty_files.append("(not a git checkout: the code measured is unknown)")
    git = {"git_commit": machine["git_commit"], "git_dirty": bool(dirty_files), "git_dirty_files": dirty_files}
    from polyvse.provenance import index_model, no_model, provenance

    git["provenance"] = provenance(  # the product-model rows' model: the product index's
        model=index_model(PRODUCT_INDEX)
        if (PRODUCT_INDEX / "manifest.json").is_file()
        else no_model(f"no product index at {PRODUCT_INDEX.relative_to(REPO)}: its rows were not measured"),
        tree={"commit": git["git_commit"], "dirty": git["git_dirty"], "dirty_files": dirty_files},
    )
    report = {
        **git,
        **results,
        "targets": {k: t for k, (t, _) in HEADLINE.items()},
        "notes": notes,
        "quick": bool(args.quick),
        "machine": machine,
        "load_average_at_end": list(os.getloadavg()),
        "wall_s": time.perf_counter() - t_start,
        "step_seconds": step_seconds,
        "details": details,
    }
    out_json = args.results_dir / "latest.json"
    write_atomic(out_json, json.dumps(report, indent=2) + "\n")
    write_atomic(args.results_dir / "latest.md", bench_page(report, HEADLINE))
    log("results: " + ", ".join(f"{k}={fmt(results.get(k))}" for k in HEADLINE))
    log(
        f"wrote {out_json} and latest.md in {report['wall_s']:.0f}s{' (with failures)' if failed else ''}"
        + (
            f"; DIRTY TREE ({', '.join(dirty_files)}): git_dirty true"
            if git["git_dirty"]
            else f"; commit {git['git_commit']}"
        )
    )
    return 1 if failed else 0


def write_merged(earlier: Path, later: Path, results_dir: Path) -> int:
    """--merge: the merged record into results_dir (atomically), or exit status 2 saying why not."""
    records = []
    for path in (earlier, later):
        try:
            records.append(json.loads(path.read_text()))
        except (OSError, ValueError) as exc:
            print(f"run_all: cannot read {path}: {exc}", file=sys.stderr)
            return 2
    try:
        merged = merge_records(*records, names=(str(earlier), str(later)))
    except ValueError as exc:
        print(f"run_all: {exc}", file=sys.stderr)
        return 2
    results_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(results_dir / "latest.json", json.dumps(merged, indent=2) + "\n")
    write_atomic(results_dir / "latest.md", bench_page(merged, HEADLINE))
    log(
        f"wrote {results_dir / 'latest.json'}: {', '.join(merged['merged']['steps'])} from {later}, the rest from {earlier}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
