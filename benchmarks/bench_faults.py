"""The fault set, run and recorded: which injected faults polyvse survives.

    python benchmarks/bench_faults.py --out benchmarks/results/faults.json [--only disk,index] [--timeout 3600]

Each fault is a group of tests under tests/test_faults_*.py that injects it for real (a damaged file, a second
writer process, a full tmpfs, SIGKILL, an add under HTTP load, a Milvus server killed or hung) and checks the
outcome a user is promised: refused naming the file, refused with a message, the previous generation or checkpoint
intact, resumed to the same result, no request failed. This script runs them with pytest (one process, so the
tiny model they share trains once), reads pytest's JUnit XML and writes per fault: ``tried`` (tests run),
``survived`` (passed), ``failed`` (with each failure's first line), ``skipped`` (with the reason: e.g. no tmpfs can
be mounted without root) and the seconds, with the provenance block every record carries. Exit status 1 when any
fault was not survived.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

#: fault -> (test file, pytest -k expression or None for the whole file)
FAULTS = {
    "index_file_truncated": ("tests/test_faults_index.py", "damaged_file and truncated"),
    "index_file_bit_flipped": ("tests/test_faults_index.py", "damaged_file and flipped or finds_what_opening"),
    "manifest_damaged": ("tests/test_faults_index.py", "damaged_manifest or without_checksums"),
    "concurrent_index_add": ("tests/test_faults_index.py", "writer"),
    "disk_full_build": ("tests/test_faults_disk.py", "build_on_a_full_disk"),
    "disk_full_add": ("tests/test_faults_disk.py", "add_on_a_full_disk"),
    "disk_full_checkpoint_save": ("tests/test_faults_disk.py", "checkpoint_save"),
    "adapt_sigkill_resume": ("tests/test_faults_adapt.py", None),
    "index_add_during_serve_load": ("tests/test_faults_serve.py", None),
    "milvus_killed_during_index_add": (
        "tests/test_faults_milvus.py",
        "index_add_with_the_server_killed or vector_index_an_interrupted_add",
    ),
    "milvus_down_under_serve": ("tests/test_faults_milvus.py", "serve_answers_503"),
}


def node_ids(fault: str) -> list[str]:
    """The pytest node ids of a fault's tests (collected, not run)."""
    path, expr = FAULTS[fault]
    cmd = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", path]
    if expr:
        cmd += ["-k", expr]
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600).stdout
    return [line.strip() for line in out.splitlines() if "::" in line]


def outcome(case: ET.Element) -> tuple[str, str | None]:
    for kind in ("failure", "error"):
        el = case.find(kind)
        if el is not None:
            return "failed", (el.get("message") or el.text or "").strip().splitlines()[0][:300] if (
                el.get("message") or el.text
            ) else kind
    el = case.find("skipped")
    if el is not None:
        return "skipped", (el.get("message") or "").strip()[:300]
    return "passed", None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="JSON file for the record")
    ap.add_argument("--only", help=f"comma-separated faults (default all: {', '.join(FAULTS)})")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds for the whole pytest run")
    args = ap.parse_args(argv)
    faults = args.only.split(",") if args.only else list(FAULTS)
    unknown = [f for f in faults if f not in FAULTS]
    if unknown:
        raise SystemExit(f"--only: unknown fault(s) {unknown}; known: {', '.join(FAULTS)}")
    ids = {f: node_ids(f) for f in faults}
    missing = [f for f, n in ids.items() if not n]
    if missing:
        raise SystemExit(f"no test collected for {missing}: the fault set and tests/test_faults_*.py disagree")
    every = sorted({n for n in ids.values() for n in n})
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        t0 = time.time()
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-n",
                "0",
                "-p",
                "no:cacheprovider",
                f"--junitxml={junit}",
                "-o",
                "junit_family=xunit2",
                *every,
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=args.timeout,
        )
        wall = time.time() - t0
        if not junit.is_file():
            raise SystemExit(
                f"pytest wrote no report (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
            )
        cases = {}
        for case in ET.parse(junit).getroot().iter("testcase"):
            module = case.get("classname", "").replace(".", "/")
            cases[f"{module}.py::{case.get('name')}"] = (case, float(case.get("time") or 0))
    record = {"pytest_exit": proc.returncode, "wall_s": round(wall, 1), "faults": {}}
    for fault in faults:
        entry = {
            "tests": FAULTS[fault][0],
            "select": FAULTS[fault][1],
            "tried": 0,
            "survived": 0,
            "failed": [],
            "skipped": [],
            "seconds": 0.0,
        }
        for node in ids[fault]:
            case, seconds = cases.get(node, (None, 0.0))
            if case is None:
                entry["failed"].append({"test": node, "why": "not in pytest's report (the run stopped?)"})
                continue
            state, why = outcome(case)
            entry["seconds"] += seconds
            if state == "skipped":
                entry["skipped"].append({"test": node, "why": why})
                continue
            entry["tried"] += 1
            if state == "passed":
                entry["survived"] += 1
            else:
                entry["failed"].append({"test": node, "why": why})
        entry["seconds"] = round(entry["seconds"], 1)
        record["faults"][fault] = entry
    sys.path.insert(0, str(REPO / "src"))
    from polyvse.provenance import no_model, provenance

    record["provenance"] = provenance(
        model=no_model(
            "fault injection: the tests' own tiny models (trained in the run on a slice of Flickr8k, seed fixed) and "
            "synthetic vector indexes; no product model is measured"
        )
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    bad = 0
    for fault, e in record["faults"].items():
        bad += bool(e["failed"]) or not e["tried"]
        note = f", {len(e['skipped'])} skipped ({e['skipped'][0]['why']})" if e["skipped"] else ""
        print(f"{fault:30s} survived {e['survived']}/{e['tried']}{note}  {e['seconds']} s")
        for f in e["failed"]:
            print(f"    FAILED {f['test']}: {f['why']}")
    print(f"written to {args.out}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
