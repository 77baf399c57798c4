"""A generated block marks every record whose provenance was reconstructed after the fact, wherever it cites one."""

from __future__ import annotations

import json
from pathlib import Path

from polyvse_train.report.records import RECONSTRUCTED_MARK, Page


def _record(path: Path, reconstructed: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    block = {
        "commit": "0" * 40,
        **({"reconstructed": {"from": ["git log"], "by": "scripts/backfill_provenance.py"}} if reconstructed else {}),
    }
    path.write_text(json.dumps({"x": 1, "provenance": block}), encoding="utf-8")


def test_a_link_to_a_reconstructed_record_says_so(tmp_path):
    _record(tmp_path / "results" / "written.json", reconstructed=False)
    _record(tmp_path / "results" / "rebuilt.json", reconstructed=True)
    _record(tmp_path / "results" / "runs" / "a" / "official-s0" / "metrics.json", reconstructed=False)
    _record(tmp_path / "results" / "runs" / "a" / "official-s1" / "metrics.json", reconstructed=True)
    page = Page(tmp_path, tmp_path / "docs" / "page.md")
    assert page.record_link("results/written.json") == "[`results/written.json`](../results/written.json)"
    assert (
        page.record_link("results/rebuilt.json")
        == f"[`results/rebuilt.json`](../results/rebuilt.json) {RECONSTRUCTED_MARK}"
    )
    # a folder of runs: one reconstructed run marks the link
    assert page.record_link("results/runs/a", "runs").endswith(f"(../results/runs/a) {RECONSTRUCTED_MARK}")
    assert RECONSTRUCTED_MARK == "(reconstructed provenance)"


def test_the_committed_pages_mark_the_product_models_reconstructed_record():
    repo = Path(__file__).resolve().parent.parent
    text = (repo / "docs" / "product-model.md").read_text(encoding="utf-8")
    assert f"(../results/model-f8k-full-polyvse-best-s0) {RECONSTRUCTED_MARK}" in text
