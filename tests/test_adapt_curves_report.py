"""The choices scripts/adapt_curves.py reports are made on val only, and README's blocks show test only for them."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).parents[1] / "scripts"


def _script(name: str):
    sys.path.insert(0, str(SCRIPTS))
    try:
        spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(SCRIPTS))


def _sc(val: float, test: float) -> dict:
    return {"val": {"mr": val}, "test": {"mr": test}}


@pytest.fixture
def record() -> dict:
    # test is highest where val is not: a choice made on test would differ
    return {"checkpoint": "C", "pivot": "en", "out": "results/x.json", "date": "d", "machine": "m", "complete": True,
            "languages_done": ["qu", "es"], "reference": {"fr": _sc(40.0, 40.0)},
            "zero_shot": {"es": {"mean": _sc(30.0, 35.0), "en": _sc(31.0, 29.0)}},
            "adapted": {"qu": {"teacher": {"100": _sc(10.0, 50.0), "1000": _sc(25.0, 24.0)},
                               "procrustes": {"100": _sc(20.0, 20.0), "1000": _sc(25.0, 26.0)}},
                        "es": {"teacher": {"1000": _sc(30.5, 45.0)}}}}


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
    rows = {"en": {"lang": "en", "status": "trained", "val": {"mr": 1}, "test": {"mr": 1}},
            "qu": {"lang": "qu", "status": None, "captions": "MultiScript30k (machine-translated)"}}
    table.adapted_rows(rows, record, "results/x.json")
    assert rows["qu"]["status"].startswith("adapted (") and rows["qu"]["val"]["mr"] == 25.0
    assert rows["en"]["status"] == "trained"
    # a row an older curves record filled is filled again from the newer one; a trained row never is
    rows["qu"].update({"status": "adapted (teacher, 100 lines)", "val": {"mr": 1.0}})
    table.adapted_rows(rows, record, "results/y.json")
    assert rows["qu"]["val"]["mr"] == 25.0 and rows["qu"]["from"] == "results/y.json"


def test_seeds_of_the_chosen_adaptation_are_averaged_for_test(record):
    curves, table = _script("adapt_curves"), _script("language_table")
    record["chosen_seeds"] = {"qu": {"method": "teacher", "size": "1000", "seeds": {
        "0": _sc(25.0, 24.0), "1": _sc(24.0, 26.0), "2": _sc(26.0, 28.0)}}}
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
    runs = {lang: {sweep.label(g): {"val": {"mr": v}} for g, v in zip(grid, values)}
            for lang, values in {"qu": [30.0, 20.0, 26.0, 26.0], "gn": [10.0, 10.0, 12.0, 12.0]}.items()}
    out = sweep.summary(runs, ["qu", "gn"])
    # word pairs' seed 0 alone (26) loses to words-only seed 0 (30), their means (26 vs 25) win
    assert out["best"]["qu"] == "subword_word_ngrams=2,subwords=True" == out["best_over_languages"]
    assert out["means"]["qu"]["subword_word_ngrams=1,subwords=True"] == {"mr": 25.0, "sd": pytest.approx(7.0711, abs=1e-3),
                                                                       "seeds": 2}


def test_scores_rank_as_search_does_csls_where_the_checkpoint_has_banks():
    """mean_recall (adapt_curves' and language_table's score) ranks through model.retrieval_scores with the
    caption's language, as `polyvse search` ranks: a CSLS checkpoint's table must not report plain cosine."""
    import numpy as np

    curves = _script("adapt_curves")
    images, captions = np.eye(4, dtype=np.float32), np.eye(4, dtype=np.float32)
    gallery = {"images": images, "captions": {"qu": (["a", "b", "c", "d"], np.arange(4))}}
    asked = []

    class Model:  # similarity finds every photo first; the checkpoint's own ranking finds each photo last
        def similarity(self, a, b):
            return a @ b.T

        def retrieval_scores(self, a, b, lang=None):
            asked.append(lang)
            return -(a @ b.T)

    m = curves.mean_recall(Model(), gallery, "qu", captions)
    assert asked and set(asked) == {"qu"}  # the query language's caption bank (the pooled one when it has none)
    assert m["mr"] < 100 and m["n_images"] == 4
