"""The quick-start sentence is the quick start's record: each step's minutes, the total, the machine and its load."""

from __future__ import annotations

import json

from polyvse_train.report.quickstart import RECORD, quickstart_block
from polyvse_train.report.records import Page


def _page(tmp_path, record: dict) -> Page:
    path = tmp_path / RECORD
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record), encoding="utf-8")
    return Page(tmp_path, tmp_path / "README.md")


def _record(load: float, dirty: bool, find_links: str | None) -> dict:
    return {
        "steps": {
            "setup": {"minutes": 2.21, "wall_s": 132.6},
            "demo": {"minutes": 3.24, "wall_s": 194.4},
            "search": {"minutes": 0.01, "wall_s": 0.52},
        },
        "to_first_search_min": 5.46,
        "pip_cache": {"find_links": find_links},
        "machine": {
            "cpu_model": "AMD EPYC",
            "cores": 2,
            "cpu_flags_of_note": ["avx2"],
            "load_average_at_start": [load],
        },
        "provenance": {"dirty": dirty},
    }


def test_the_sentence_gives_each_step_the_total_and_the_machine(tmp_path):
    text = quickstart_block(_page(tmp_path, _record(0.4, False, None)))
    assert text.startswith("`make setup` into a new environment took 2.2 minutes and `make demo` from an empty data")
    assert "caches 3.2 minutes, then the first search 0.5 s: **5.5 minutes** from nothing to a first search" in text
    assert "on a 2-core AMD EPYC without native bf16 (load average 0.4 at the start)" in text
    assert "uncommitted" not in text and "wheel folder" not in text and "shared" not in text
    assert text.endswith("([`record`](benchmarks/results/quickstart.json)).")


def test_a_busy_machine_a_dirty_tree_and_a_local_wheel_folder_are_said(tmp_path):
    text = quickstart_block(_page(tmp_path, _record(9.0, True, "/opt/wheels")))
    assert "its cores shared with other jobs (load average 9.0 at the start)" in text
    assert "pip reading packages from a local wheel folder" in text
    assert "(written on an uncommitted tree, [`record`]" in text


def test_a_record_without_the_load_average_leaves_it_out(tmp_path):
    record = _record(0.4, False, None)
    del record["machine"]["load_average_at_start"]
    text = quickstart_block(_page(tmp_path, record))
    assert "on a 2-core AMD EPYC without native bf16 ([`record`]" in text and "load average" not in text
