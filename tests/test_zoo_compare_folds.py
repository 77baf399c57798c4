"""`polyvse zoo compare --before-doc`: the F8K-ML zoo retrained under the exclusion rule against the cross-validation
table of an earlier results.md (its runs were never kept as records); fake runs, no training."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polyvse_app.cli import main
from polyvse_train.zoo.compare import compare_folds_with_doc, fold_means_from_doc
from polyvse_train.zoo.results import RECALLS

REPO = Path(__file__).resolve().parents[1]

OLD_DOC = """# Method zoo: results on F8K-ML

## 1. Image–sentence retrieval, 5-fold cross-validation (primary)

| config | runs | params (M) | CPU min/run | en mR | de mR | fr mR | cs mR | zh mR | mean |
|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|
| ame-mono | 5 | 2.99 | 0.9 | 19.4 ± 1.8 | - | - | - | - | 19.4 ± 1.8 |
| vse | 5 | 5.54 | 2.5 | 21.0 ± 1.5 | 23.0 ± 1.9 | - | - | - | 22.0 ± 1.5 |
| vsepp | 5 | 5.54 | 2.5 | 30.0 ± 1.0 | 30.0 ± 1.0 | - | - | - | 30.0 ± 1.0 |

Best configuration per language:

| language | best config | mR | runner-up (mR) |
|---|---|---:|---|
| en | vsepp | 30.0 ± 1.0 | vse (21.0) |

## 2. Official Flickr8K test split (reference, seed 0)
"""


def _fold_run(out: Path, config: str, fold: int, values: dict[str, float]) -> None:
    d = out / config / f"fold{fold}of5-s0"
    d.mkdir(parents=True)
    langs = {lang: {**{k: v for k in RECALLS}, "i2t_medr": 5.0, "t2i_medr": 5.0} for lang, v in values.items()}
    (d / "metrics.json").write_text(json.dumps({"languages": langs, "parameters": 2_000_000}))
    (d / "zoo_run.json").write_text(
        json.dumps(
            {
                "config_name": config,
                "config": {"split": f"fold{fold}of5", "seed": 0},
                "overrides": {},
                "wall_seconds": 90,
                "cpu_seconds": 150,
                "finished_utc": "2026-11-26T08:00:00Z",
            }
        )
    )


def test_fold_means_are_read_from_the_cross_validation_table():
    means = fold_means_from_doc(OLD_DOC)
    assert means["vse"] == {"en": 21.0, "de": 23.0, "mean": 22.0, "cell": "22.0 ± 1.5"}
    assert means["ame-mono"] == {"en": 19.4, "mean": 19.4, "cell": "19.4 ± 1.8"}
    with pytest.raises(ValueError, match="old.md has no section"):
        fold_means_from_doc("# something else\n", "old.md")
    with pytest.raises(ValueError, match="no cross-validation table"):
        fold_means_from_doc(OLD_DOC.split("| config")[0], "old.md")


def test_configs_retrained_on_every_fold_are_set_against_the_old_table(tmp_path, capsys):
    after = tmp_path / "after"
    for fold in range(5):
        _fold_run(after, "vse", fold, {"en": 20.0 + fold, "de": 24.0})  # en mean 22.0 (+1.0), de +1.0
        _fold_run(after, "ame-mono", fold, {"en": 19.4})
    for fold in range(3):  # vsepp: still training, compared only once every fold is in
        _fold_run(after, "vsepp", fold, {"en": 10.0, "de": 10.0})
    table = compare_folds_with_doc(OLD_DOC, after, ["vse", "ame-mono"])
    lines = table.splitlines()
    assert lines[2] == "| vse | 5 | 22.0 ± 1.5 | 23.0 ± 0.8 | +1.0 | en +1.0, de +1.0 |"
    assert lines[3] == "| ame-mono | 5 | 19.4 ± 1.8 | 19.4 ± 0.0 | +0.0 | en +0.0 |"
    assert "Not yet retrained on every fold (the earlier figure only): vsepp." in table
    # a zoo whose every config has 3 of its 5 folds (folds run split-major) compares none of them yet
    partial = tmp_path / "partial"
    for fold in range(3):
        _fold_run(partial, "vsepp", fold, {"en": 10.0, "de": 10.0})
    assert "| vsepp |" not in compare_folds_with_doc(OLD_DOC, partial, ["vsepp"])
    # the CLI writes it into results.md's F8K-ML block
    old, docs = tmp_path / "old.md", tmp_path / "docs"
    old.write_text(OLD_DOC)
    docs.mkdir()
    (docs / "results.md").write_text(
        "a\n<!-- zoo-f8k-ml-before-after:start -->\n<!-- zoo-f8k-ml-before-after:end -->\n"
    )
    assert (
        main(
            [
                "zoo",
                "compare",
                "--spec",
                str(REPO / "configs" / "zoo" / "cpu.yaml"),
                "--before-doc",
                str(old),
                "--out",
                str(after),
                "--docs",
                str(docs),
            ]
        )
        == 0
    )
    assert "wrote the <!-- zoo-f8k-ml-before-after --> block" in capsys.readouterr().out
    assert lines[2] in (docs / "results.md").read_text()
