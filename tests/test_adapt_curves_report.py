"""The choices scripts/adapt_curves.py reports are made on val only, and README's blocks show test only for them."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

SCRIPTS = Path(__file__).parents[1] / "scripts"


def _script(name: str):
    """A script as a module, loaded from its file alone (the scripts import the library, never each other)."""
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sc(val: float, test: float) -> dict:
    return {"val": {"mr": val}, "test": {"mr": test}}


@pytest.fixture
def record() -> dict:
    # test is highest where val is not: a choice made on test would differ
    return {
        "checkpoint": "C",
        "pivot": "en",
        "out": "results/x.json",
        "date": "d",
        "machine": "m",
        "complete": True,
        "languages_done": ["qu", "es"],
        "reference": {"fr": _sc(40.0, 40.0)},
        "zero_shot": {"es": {"mean": _sc(30.0, 35.0), "en": _sc(31.0, 29.0)}},
        "adapted": {
            "qu": {
                "teacher": {"100": _sc(10.0, 50.0), "1000": _sc(25.0, 24.0)},
                "procrustes": {"100": _sc(20.0, 20.0), "1000": _sc(25.0, 26.0)},
            },
            "es": {"teacher": {"1000": _sc(30.5, 45.0)}},
        },
    }


def test_choices_are_made_on_val(record):
    curves = _script("adapt_curves")
    method, size, scores = curves.chosen_adaptation(record, "qu")
    assert (size, scores["val"]["mr"]) == ("1000", 25.0)  # the val best, not teacher 100's test 50
    assert curves.chosen_adaptation(record, "gn") is None
    assert curves.chosen_zero_shot(record) == ("en", 31.0)  # not "mean", whose test is higher
    table = curves.markdown(record)
    assert "| es | 31.0 (en) |" in table and "zero-shot en | 29.0" in table  # 31.0 on val beats teacher's 30.5
    assert "50.0" not in table and "45.0" not in table  # test of what was not chosen is never shown
    assert "PARTIAL" not in table and "PARTIAL" in curves.markdown({**record, "complete": False})


def test_language_table_takes_the_adapted_row_chosen_on_val(record):
    table = _script("language_table")
    rows = {
        "en": {"lang": "en", "status": "trained", "val": {"mr": 1}, "test": {"mr": 1}},
        "qu": {"lang": "qu", "status": None, "captions": "MultiScript30k (machine-translated)"},
    }
    table.adapted_rows(rows, record, "results/x.json")
    assert rows["qu"]["status"].startswith("adapted (") and rows["qu"]["val"]["mr"] == 25.0
    assert rows["en"]["status"] == "trained"
    # a row an older curves record filled is filled again from the newer one; a trained row never is
    rows["qu"].update({"status": "adapted (teacher, 100 lines)", "val": {"mr": 1.0}})
    table.adapted_rows(rows, record, "results/y.json")
    assert rows["qu"]["val"]["mr"] == 25.0 and rows["qu"]["from"] == "results/y.json"


def test_seeds_of_the_chosen_adaptation_are_averaged_for_test(record):
    curves, table = _script("adapt_curves"), _script("language_table")
    record["chosen_seeds"] = {
        "qu": {
            "method": "teacher",
            "size": "1000",
            "seeds": {"0": _sc(25.0, 24.0), "1": _sc(24.0, 26.0), "2": _sc(26.0, 28.0)},
        }
    }
    summary = curves.seed_summary(record, "qu")
    assert summary["seeds"] == 3 and summary["mean"]["test"] == pytest.approx(26.0)
    assert summary["sd"]["test"] == pytest.approx(2.0)
    assert "26.0 ± 2.0 (3 seeds)" in curves.markdown(record)
    rows = {"qu": {"lang": "qu", "status": None}}
    table.adapted_rows(rows, record, "r.json")
    assert rows["qu"]["test"]["mr"] == pytest.approx(26.0) and "3 seeds" in rows["qu"]["status"]
    # seeds of a run that is no longer the val choice are not reported as the choice's
    record["chosen_seeds"]["qu"]["size"] = "100"
    assert curves.seed_summary(record, "qu") is None and "3 seeds" not in curves.markdown(record)


def test_sweep_scores_a_setting_by_its_mean_over_seeds():
    sweep = _script("adapt_sweep")
    grid = sweep.settings_grid("subword_word_ngrams=1,2;seed=0,1", ["subwords=true"])
    assert len(grid) == 4 and all(g["subwords"] is True for g in grid)
    with pytest.raises(SystemExit, match="not a TeacherSettings field"):
        sweep.settings_grid("nonsense=1", [])
    runs = {
        lang: {sweep.label(g): {"val": {"mr": v}} for g, v in zip(grid, values)}
        for lang, values in {"qu": [30.0, 20.0, 26.0, 26.0], "gn": [10.0, 10.0, 12.0, 12.0]}.items()
    }
    out = sweep.summary(runs, ["qu", "gn"])
    # word pairs' seed 0 alone (26) loses to words-only seed 0 (30), their means (26 vs 25) win
    assert out["best"]["qu"] == "subword_word_ngrams=2,subwords=True" == out["best_over_languages"]
    assert out["means"]["qu"]["subword_word_ngrams=1,subwords=True"] == {
        "mr": 25.0,
        "sd": pytest.approx(7.0711, abs=1e-3),
        "seeds": 2,
    }


class CslsModel:
    """Similarity finds every photo first; the checkpoint's own ranking (its CSLS banks) finds each photo last."""

    def __init__(self, langs=("en",), readable=("en", "qu")):
        self.languages, self.asked, self.zero_shot = list(langs), [], "mean"
        self.checkpoint = SimpleNamespace(adapted_languages=[])
        self.captions = SimpleNamespace(towers=[SimpleNamespace(languages=frozenset(readable))])

    def similarity(self, a, b):
        return a @ b.T

    def retrieval_scores(self, a, b, lang=None):
        self.asked.append(lang)
        return -(a @ b.T)

    def encode_text(self, texts, lang):
        return np.eye(len(texts), dtype=np.float32)


def _galleries(model, langs, reference, splits=None):
    caps = (["a", "b", "c", "d"], np.arange(4))
    return {"val": {"images": np.eye(4, dtype=np.float32), "captions": {k: caps for k in [reference, *langs]}}}


# each photo's caption ranked last of 4: R@1 0, R@5 and R@10 100; plain cosine would give 100
AS_SEARCH_RANKS = 200 / 3


def test_scores_rank_as_search_does_csls_where_the_checkpoint_has_banks(tmp_path):
    """The languages evaluator's mean recall (adapt_curves', adapt_sweep's and language_table's score) ranks through
    model.retrieval_scores with the caption's language, as `polyvse search` ranks: a CSLS checkpoint's table must
    not report plain cosine."""
    from polyvse.evaluation.languages import LanguagesEvaluator

    model = CslsModel()
    m = LanguagesEvaluator(tmp_path).mean_recall(model, _galleries(model, ["qu"], "en")["val"], "qu")
    assert model.asked and set(model.asked) == {"qu"}  # the query language's caption bank (pooled if it has none)
    assert m["mr"] == pytest.approx(AS_SEARCH_RANKS) and m["n_images"] == 4


def test_evaluate_task_languages_ranks_as_search_ranks(tmp_path, monkeypatch):
    """`polyvse evaluate --task languages` scores every served language ranked as search ranks (CSLS against the
    checkpoint's banks for a CSLS checkpoint, never plain cosine), on the --split asked for only."""
    import json

    import polyvse
    from polyvse.evaluation.languages import LanguagesEvaluator
    from polyvse_app.cli import main

    model = CslsModel()
    monkeypatch.setattr(polyvse, "load", lambda *a, **k: model)
    monkeypatch.setattr("polyvse_app.commands.evaluate.photo_model", lambda *a, **k: model)  # what evaluate loads
    monkeypatch.setattr(LanguagesEvaluator, "galleries", lambda self, *a, **k: _galleries(*a, **k))
    monkeypatch.setattr("polyvse.provenance.provenance", lambda *a, **k: {})  # the fake has no weights to fingerprint
    out = tmp_path / "languages.json"
    assert (
        main(
            [
                "evaluate",
                "--checkpoint",
                str(tmp_path),
                "--task",
                "languages",
                "--langs",
                "qu,gn",
                "--split",
                "val",
                "--data-root",
                str(tmp_path),
                "--json",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    rows = json.loads(out.read_text())["result"]
    assert rows["en"]["status"] == "trained" and rows["qu"]["status"] == "zero-shot"
    assert rows["en"]["val"]["mr"] == pytest.approx(AS_SEARCH_RANKS) == rows["qu"]["val"]["mr"]
    assert "test" not in rows["en"] and rows["gn"]["status"] is None and "val" not in rows["gn"]
    assert set(model.asked) == {"en", "qu"}


def test_points_val_did_not_choose_carry_no_test_figures():
    """adapt_curves scores every point on val and computes test once, for what val chose (test reuse otherwise)."""
    from polyvse.adaptation.curves import chosen_adaptation, measure_language

    val = {
        ("zs", "mean"): 20.0,
        ("zs", "en"): 35.0,
        ("teacher", 100): 30.0,
        ("teacher", None): 33.0,
        ("procrustes", 100): 31.0,
        ("procrustes", None): 32.0,
    }
    asked = []

    def score(key, seed, splits):
        asked.append((key, seed, tuple(splits)))
        return {s: {"mr": val[key] + seed + (100 if s == "test" else 0)} for s in splits}

    record = {"zero_shot": {}, "adapted": {}}
    measure_language(
        record,
        "qu",
        ["mean", "en"],
        lambda how, splits: score(("zs", how), 0, splits),
        ["teacher", "procrustes"],
        [100, None],
        lambda method, size, seed, splits: score((method, size), seed, splits),
        extra_seeds=[1, 2],
    )
    with_test = [(m, s) for m, by in record["adapted"]["qu"].items() for s, sc in by.items() if "test" in sc]
    assert with_test == [("teacher", "all")] == [chosen_adaptation(record, "qu")[:2]]
    assert record["adapted"]["qu"]["teacher"]["all"]["test"]["mr"] == 133.0
    # zero-shot en beats every adaptation on val: it is what val chose, so it has test; mean does not
    assert "test" in record["zero_shot"]["qu"]["en"] and "test" not in record["zero_shot"]["qu"]["mean"]
    seeds = record["chosen_seeds"]["qu"]
    assert (seeds["method"], seeds["size"], sorted(seeds["seeds"])) == ("teacher", "all", ["0", "1", "2"])
    tested = {(k, seed) for k, seed, splits in asked if "test" in splits}
    assert tested == {(("teacher", None), 0), (("teacher", None), 1), (("teacher", None), 2), (("zs", "en"), 0)}
