"""scripts/f8k_full_results.py: trains the f8k-full runs through the zoo and prints their tables (no training here)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "f8k_full_results.py"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("f8k_full_results", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_prints_the_tables_of_the_runs(script, tmp_path, capsys, monkeypatch):
    """The script prints what polyvse_train.report renders from the runs (tests/test_report.py checks the tables)."""
    monkeypatch.setattr(script, "f8k_full_text", lambda runs, seeds, files: f"tables of {runs} {list(seeds)} {files}")
    assert script.main(["--runs", str(tmp_path), "--no-train", "--seeds", "0", "1"]) == 0
    assert capsys.readouterr().out.strip() == (
        f"tables of {tmp_path} [0, 1] {{'e5-frozen': 'configs/f8k-full/e5-frozen.yaml', "
        "'polyvse-best': 'configs/f8k-full/polyvse-best.yaml'}"
    )


def test_training_goes_through_the_zoo_with_the_data_root(script, tmp_path, monkeypatch):
    """The README's runs are the f8k-full zoo's own: `polyvse zoo run --jobs N` on e5-frozen + polyvse-best, the
    data root passed on; a failing run is an error naming where to look."""
    log = tmp_path / "calls.txt"
    fake = tmp_path / "polyvse"
    fake.write_text(f'#!/bin/sh\necho "$@" >> {log}\nexit ${{FAKE_RC:-0}}\n')
    fake.chmod(0o755)
    script.train(tmp_path / "runs", 2, str(fake), "/data")
    calls = log.read_text().splitlines()
    assert len(calls) == 1
    assert "zoo run --spec" in calls[0] and "configs/zoo/f8k-full.yaml --configs e5-frozen,polyvse-best" in calls[0]
    assert calls[0].endswith(f"--out {tmp_path / 'runs'} --retry-failed --jobs 2 --data-root /data")
    assert script.config_file(script.BEST) == "configs/f8k-full/polyvse-best.yaml"
    monkeypatch.setenv("FAKE_RC", "1")
    with pytest.raises(SystemExit, match="error.json"):
        script.train(tmp_path / "runs", 1, str(fake))
    monkeypatch.setenv("POLYVSE_DATA", "/env-data")
    assert script.data_root(None) == "/env-data" and script.data_root("/given") == "/given"
