"""The zoo's page says which runs' figures rest on a provenance block reconstructed after the fact, with the mark the
record links of the generated blocks carry; runs recorded with their figures get no such line."""

from __future__ import annotations

from pathlib import Path

from polyvse_train.report.records import RECONSTRUCTED_MARK
from polyvse_train.zoo.results import RunResult, reconstructed_note

REPO = Path(__file__).resolve().parents[1]


def _run(reconstructed: bool) -> RunResult:
    provenance = {
        "command": "polyvse zoo run",
        **({"reconstructed": {"from": ["x"], "by": "y"}} if reconstructed else {}),
    }
    return RunResult("vse", "official", 0, "", Path("vse/official-s0"), {}, {"provenance": provenance})


def test_the_note_counts_the_reconstructed_runs_and_carries_the_mark():
    assert reconstructed_note([_run(False), _run(False)]) == []
    assert reconstructed_note([RunResult("vse", "official", 0, "", Path("."), {}, {})]) == []
    (some,) = reconstructed_note([_run(True), _run(False), _run(False)])
    assert "1 of 3 runs" in some and RECONSTRUCTED_MARK in some
    (every,) = reconstructed_note([_run(True), _run(True)])
    assert "every run" in every and RECONSTRUCTED_MARK in every


def test_the_committed_page_marks_both_zoos():
    """Every committed zoo record's provenance was reconstructed: both headers of docs/results.md say so."""
    text = (REPO / "docs" / "results.md").read_text(encoding="utf-8")
    assert text.count(f"rest on records {RECONSTRUCTED_MARK}") == 2
