"""benchmarks/results/latest.md is the page polyvse_train.report.bench_page renders from latest.json: the committed
page re-renders byte for byte from the committed record (its targets as the record states them)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"


def test_latest_md_renders_from_latest_json():
    from polyvse_train.report.bench_page import bench_page

    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import run_all
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    record = json.loads((RESULTS / "latest.json").read_text(encoding="utf-8"))
    headline = {k: (record["targets"][k], ok) for k, (_, ok) in run_all.HEADLINE.items()}
    assert bench_page(record, headline) == (RESULTS / "latest.md").read_text(encoding="utf-8")


def test_a_missed_target_is_marked():
    from polyvse_train.report.bench_page import bench_page

    record = json.loads((RESULTS / "latest.json").read_text(encoding="utf-8"))
    key = next(k for k, v in record["targets"].items() if isinstance(record.get(k), (int, float)))
    page = bench_page(record, {key: ("never", lambda v: False)})
    assert f"| `{key}` |" in page and "| **no** |" in page
