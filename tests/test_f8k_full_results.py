"""scripts/f8k_full_results.py: the README's f8k-full tables from run folders (fake metrics, no training)."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "f8k_full_results.py"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("f8k_full_results", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def lang_metrics(mr: float, n: int) -> dict:
    keys = ("i2t_r1", "i2t_r5", "i2t_r10", "t2i_r1", "t2i_r5", "t2i_r10")
    return {**{k: mr for k in keys}, "i2t_medr": 5.0, "t2i_medr": 6.0, "mr": mr, "n_images": n}


def write_run(script, runs: Path, config: str, seed: int, mrs: dict, captions: int = 27919) -> None:
    out = script.run_dir(runs, config, seed)
    out.mkdir(parents=True, exist_ok=True)
    metrics = {"n_train_photos": 5867, "n_train_captions": captions,
               "languages": {lang: lang_metrics(v, 1000 if lang == "en" else 929) for lang, v in mrs.items()}}
    (out / "metrics.json").write_text(json.dumps(metrics))


def test_report_means_spreads_and_differences(script, tmp_path, capsys):
    for seed, (b_en, b_cs, x_en, x_cs) in enumerate([(30.0, 20.0, 40.0, 24.0), (32.0, 22.0, 42.0, 26.0),
                                                      (34.0, 24.0, 44.0, 22.0)]):
        write_run(script, tmp_path, script.BASELINE, seed, {"en": b_en, "cs": b_cs})
        write_run(script, tmp_path, script.BEST, seed, {"en": x_en, "cs": x_cs})
    text = script.report(tmp_path, [0, 1, 2])
    assert "5,867 training photos, 27,919 training captions" in text and "seeds 0, 1, 2" in text
    assert "| baseline mR | 32.0 ± 2.0 | 22.0 ± 2.0 |" in text
    assert "| best mR | 42.0 ± 2.0 | 24.0 ± 2.0 |" in text
    assert "| difference | +10.0 | +2.0 |" in text
    assert "| cs | 929 | 24.0 ± 2.0 |" in text  # the best model's table: gallery size, then mean ± sd of R@1
    assert script.main(["--runs", str(tmp_path), "--no-train"]) == 0
    assert capsys.readouterr().out.strip() == text
    with pytest.raises(FileNotFoundError):  # a missing seed is an error, never a silently smaller mean
        script.report(tmp_path, [0, 1, 2, 3])
    for seed in range(3):  # a best model that reads every caption of a photo: both counts are stated
        write_run(script, tmp_path, script.BEST, seed, {"en": 40.0, "cs": 24.0}, captions=93788)
    assert "5,867 training photos, 93,788 training captions for the best model, 27,919 for the baseline;" in (
        script.report(tmp_path, [0, 1, 2]))


def test_training_goes_through_the_zoo_with_the_data_root(script, tmp_path, monkeypatch):
    """The README's runs are the f8k-full zoo's own: `polyvse zoo run --jobs N` on e5-frozen + polyvse-best, the
    data root passed on; a failing run is an error naming where to look."""
    log = tmp_path / "calls.txt"
    fake = tmp_path / "polyvse"
    fake.write_text(f"#!/bin/sh\necho \"$@\" >> {log}\nexit ${{FAKE_RC:-0}}\n")
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
