"""The build-time sentence is the build record's: its wall time, its stages in minutes, machine and precision."""

from __future__ import annotations

import json

from polyvse.provenance import PRODUCT_BUILD_RECORD
from polyvse_train.report.build_time import build_time_block
from polyvse_train.report.records import Page


def _page(tmp_path, record: dict) -> Page:
    path = tmp_path / PRODUCT_BUILD_RECORD
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record), encoding="utf-8")
    return Page(tmp_path, tmp_path / "README.md")


def test_the_sentence_names_every_stage_the_machine_and_the_precision(tmp_path):
    record = {
        "wall_s": 6000.0,
        "goal_s": 5400,
        "threads": 2,
        "precision": {"asked": "fp32", "trained": "fp32"},
        "stages": {"before_training": 1.0, "training": 4200.0, "index": 90.0, "adaptation": 1709.0},
        "machine": {"cpu_model": "AMD EPYC", "cores": 2, "cpu_flags_of_note": ["avx2"], "gpu": None},
    }
    text = build_time_block(_page(tmp_path, record))
    assert text.startswith("The whole build took **100.0 minutes** from empty caches in one run, against a goal of 90")
    assert "a 2-core AMD EPYC without native bf16, trained in fp32, 2 threads" in text
    assert "training 70.0, the index 1.5, the adaptation stage 28.5 minutes" in text
    assert "](benchmarks/results/make_model.json)" in text


def test_a_record_without_an_adaptation_stage_says_so(tmp_path):
    record = {
        "wall_s": 600.0,
        "precision": {"asked": "auto", "trained": "bf16"},
        "stages": {"training": 540.0, "index": 60.0},
        "machine": {"cpu_model": "x", "cores": 4, "cpu_flags_of_note": ["avx512_bf16"]},
    }
    text = build_time_block(_page(tmp_path, record))
    assert text.startswith("The build (it had no adaptation stage then) took **10.0 minutes**")
    assert "with native bf16, trained in bf16" in text and "against a goal" not in text
