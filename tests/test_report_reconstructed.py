"""A generated block marks every record whose provenance was reconstructed after the fact, wherever it cites one."""

from __future__ import annotations

import json
import re
from pathlib import Path

from polyvse_train.report.records import RECONSTRUCTED_MARK, Page, reconstructed


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


def test_the_committed_pages_mark_exactly_the_reconstructed_records_they_link():
    repo = Path(__file__).resolve().parent.parent
    pages = [repo / "README.md", *sorted((repo / "docs").rglob("*.md"))]
    link = re.compile(
        r"\[`[^`]+`\]\(((?:\.\./)*)((?:results|benchmarks/results)/[^)#]+)\)( \(reconstructed provenance\))?"
    )
    seen = {True: 0, False: 0}
    for page in pages:
        for m in link.finditer(page.read_text(encoding="utf-8")):
            record = m.group(2).rstrip("/")
            if not (repo / record).exists():
                continue
            marked = m.group(3) is not None
            assert marked == reconstructed(repo, record), f"{page.relative_to(repo)}: {record} marked={marked}"
            seen[marked] += 1
    assert seen[True] and seen[False]  # the pages cite both kinds, so the check above ran on each
