"""The search guide's start-up sentence is the cli_product record's: the median, the runs' spread, the machine."""

from __future__ import annotations

import json

import pytest

from polyvse_train.report.query_start import RECORD, query_start_block
from polyvse_train.report.records import Page


def _page(tmp_path, record: dict) -> Page:
    path = tmp_path / RECORD
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record), encoding="utf-8")
    return Page(tmp_path, tmp_path / "docs" / "guides" / "search.md")


def _record(runs, dirty=False, load=0.3) -> dict:
    return {
        "cli_search_product_s": sorted(runs)[len(runs) // 2],
        "details": {"cli_product": {"cli_search_runs_s": runs}},
        "machine": {"cpu_model": "AMD EPYC", "cores": 2, "cpu_flags_of_note": ["avx512_bf16"]}
        | ({"load_average_at_start": [load]} if load is not None else {}),
        "provenance": {"dirty": dirty},
    }


def test_the_sentence_is_the_median_the_spread_and_the_machine(tmp_path):
    text = query_start_block(_page(tmp_path, _record([0.45, 0.41, 0.52, 0.47, 0.44])))
    assert text.startswith("On the product model a query took **0.45 s** from a fresh process (the median of 5 runs")
    assert "0.41–0.52 s), on a 2-core AMD EPYC with native bf16 (load average 0.3 at the start)" in text
    assert text.endswith("([`record`](../../benchmarks/results/query-product/latest.json)).")
    assert "uncommitted" not in text


def test_one_run_a_dirty_tree_and_no_load_average_are_said_as_they_are(tmp_path):
    text = query_start_block(_page(tmp_path, _record([0.5], dirty=True, load=None)))
    assert "(one run), on a 2-core AMD EPYC with native bf16 (written on an uncommitted tree, [`record`]" in text
    assert "load average" not in text


def test_a_record_without_the_figure_is_an_error_naming_the_record(tmp_path):
    record = _record([0.5])
    del record["cli_search_product_s"]
    with pytest.raises(ValueError, match="query-product/latest.json: no cli_search_product_s"):
        query_start_block(_page(tmp_path, record))
