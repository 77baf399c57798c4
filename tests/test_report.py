"""`polyvse report`: every generated block of README and docs is what its records render, and the check fails on
a stale block, an unknown block or a missing record."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from polyvse.evaluation.report import block_body, block_names, replace_block
from polyvse_app.cli import main as cli
from polyvse_train.report import RecordError, stale, write_all
from polyvse_train.report.f8k_full import BASELINE, BEST, PRODUCT, RUNS, f8k_full_text

REPO = Path(__file__).resolve().parents[1]


def test_committed_blocks_match_their_records():
    """README's headline, the docs' product-model, languages, bench and f8k-full blocks and the zoo's
    docs/results.md equal what `polyvse report` renders from the committed records: a figure edited by hand,
    or a record changed without `polyvse report`, fails here."""
    assert stale(REPO) == [], "run `polyvse report` and commit what it writes"


def test_replace_block_keeps_everything_around_it():
    text = "a\n<!-- x:start -->\nold\n<!-- x:end -->\nb\n"
    assert replace_block(text, "x", "new\n") == "a\n<!-- x:start -->\nnew\n<!-- x:end -->\nb\n"
    assert block_body(text, "x") == "\nold\n" and block_body(text, "y") is None
    assert block_names(text + "<!-- y:start -->\n<!-- y:end -->") == ["x", "y"]
    assert replace_block("a\n", "y", "z") == "a\n\n<!-- y:start -->\nz\n<!-- y:end -->\n"  # appended


def _lang(mr: float, n: int) -> dict:
    keys = ("i2t_r1", "i2t_r5", "i2t_r10", "t2i_r1", "t2i_r5", "t2i_r10")
    return {**{k: mr for k in keys}, "i2t_medr": 5.0, "t2i_medr": 6.0, "mr": mr, "n_images": n}


def _write_run(runs: Path, config: str, seed: int, mrs: dict, captions: int, cpu: float, **settings) -> None:
    out = runs / config / f"official-s{seed}"
    out.mkdir(parents=True, exist_ok=True)
    metrics = {
        "n_train_photos": 5867,
        "n_train_captions": captions,
        "seed": seed,
        "config": settings,
        "languages": {g: _lang(v, 1000 if g == "en" else 929) for g, v in mrs.items()},
    }
    (out / "metrics.json").write_text(json.dumps(metrics))
    (out / "zoo_run.json").write_text(json.dumps({"cpu_seconds": cpu}))


def test_f8k_full_tables_means_spreads_differences_and_budgets(tmp_path):
    for seed, (b_en, b_cs, x_en, x_cs) in enumerate(
        [(30.0, 20.0, 40.0, 24.0), (32.0, 22.0, 42.0, 26.0), (34.0, 24.0, 44.0, 22.0)]
    ):
        _write_run(tmp_path, BASELINE, seed, {"en": b_en, "cs": b_cs}, 27852, 100.0, backbone="lite0")
        _write_run(
            tmp_path, BEST, seed, {"en": x_en, "cs": x_cs}, 93788, 7000.0, backbone="lite2", retrieval_scoring="csls"
        )
    text = f8k_full_text(tmp_path, (0, 1, 2))
    assert "5,867 training photos, 93,788 training captions for the best model, 27,852 for the baseline" in text
    assert "| baseline mR | 32.0 ± 2.0 | 22.0 ± 2.0 |" in text and "| best mR | 42.0 ± 2.0 | 24.0 ± 2.0 |" in text
    assert "| difference | +10.0 | +2.0 |" in text and "| cs | 929 | 24.0 ± 2.0 |" in text
    # the comparison states what differs beyond the method: captions, CPU time, settings
    assert "7,000 against 100 CPU-seconds of training (70x" in text
    assert "`backbone` lite2 vs lite0" in text and "`retrieval_scoring` csls vs its default" in text
    with pytest.raises(RecordError, match="official-s3"):  # a missing seed: an error, never a smaller mean
        f8k_full_text(tmp_path, (0, 1, 2, 3))


@pytest.fixture
def small_repo(tmp_path):
    """A repository with README's headline block and the records it renders (copied from this checkout)."""
    for record in (PRODUCT, f"{RUNS}/{BEST}", f"{RUNS}/{BASELINE}"):
        shutil.copytree(REPO / record, tmp_path / record, ignore=shutil.ignore_patterns("*.jsonl", "*.log"))
    (tmp_path / "README.md").write_text("# x\n\n<!-- headline:start -->\n<!-- headline:end -->\n\nend\n")
    return tmp_path


def test_check_fails_on_a_stale_block_and_report_fixes_it(small_repo, capsys):
    assert stale(small_repo) == ["README.md: block headline"]  # never rendered
    assert write_all(small_repo) == [small_repo / "README.md"]
    assert stale(small_repo) == [] and cli(["report", "--check", "--repo", str(small_repo)]) == 0
    text = (small_repo / "README.md").read_text()
    assert text.endswith("<!-- headline:end -->\n\nend\n") and "| 55.3 |" in text  # the product model's en mR
    # a record changes (a retrained product model) and the committed block no longer says what it holds
    metrics = small_repo / PRODUCT / "metrics.json"
    data = json.loads(metrics.read_text())
    data["languages"]["en"]["mr"] = 61.0
    metrics.write_text(json.dumps(data))
    capsys.readouterr()
    assert cli(["report", "--check", "--repo", str(small_repo)]) == 1
    assert "stale: README.md: block headline" in capsys.readouterr().out
    # a figure edited by hand is stale too
    write_all(small_repo)
    readme = small_repo / "README.md"
    readme.write_text(readme.read_text().replace("| 61.0 |", "| 62.0 |"))
    assert stale(small_repo) == ["README.md: block headline"]


def test_unknown_block_and_missing_record_are_errors_naming_them(small_repo, capsys):
    (small_repo / "docs").mkdir()
    (small_repo / "docs" / "x.md").write_text("<!-- nonsense:start -->\n<!-- nonsense:end -->\n")
    assert cli(["report", "--check", "--repo", str(small_repo)]) == 2
    assert "docs/x.md: block <!-- nonsense:start --> has no renderer" in capsys.readouterr().err
    (small_repo / "docs" / "x.md").write_text("<!-- languages:start -->\n<!-- languages:end -->\n")
    with pytest.raises(RecordError, match="results/languages-model.json: no such record"):
        stale(small_repo)
