"""benchmarks/bench_auto_language.py's parts: captions measured on a stub searcher (real lingua detection), recall
and refusals summarised at every agreement threshold, and the threshold chosen by them. The benchmark itself
measures the product model (benchmarks/results/archive/auto_language_*.json); here nothing is measured."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from polyvse.index.search import Hit
from polyvse.modules.pretrained import get_pretrained_encoder

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_auto_language as bench  # noqa: E402

TRAINED = ["en", "de", "fr", "cs", "zh"]
SERVED = TRAINED + sorted(
    set(get_pretrained_encoder("e5-small").languages | get_pretrained_encoder("use-multilingual").languages)
    - set(TRAINED)
)


def test_photo_ids_are_the_flickr_id_of_the_file_name():
    assert bench.photo_id("1000268201_693b08cb0e.jpg") == "1000268201"
    assert bench.photo_id("/x/y/3385593926_d3e9c21170.jpg") == "3385593926"


class _Searcher:
    """A product-like model (frozen towers, per-language parts): each trained language's part ranks its own photos
    ("p-<lang>-<i>"), every other language shares the fallback part ("p-mean-<i>")."""

    def __init__(self):
        self.languages, self.served_languages = TRAINED, {c: "trained" for c in SERVED}
        self.model = SimpleNamespace(
            languages=TRAINED,
            captions=SimpleNamespace(
                towers=[get_pretrained_encoder("e5-small"), get_pretrained_encoder("use-multilingual")]
            ),
            checkpoint=SimpleNamespace(adapted_languages={}),
        )

    def embed_text(self, text, lang):
        return np.array([[TRAINED.index(lang) if lang in TRAINED else -1]], dtype=np.float32)

    def search_vectors(self, vector, k):
        part = int(vector[0, 0])
        tag = TRAINED[part] if part >= 0 else "mean"
        return [[Hit(i + 1, i, f"p-{tag}-{i}_x.jpg", "", 1.0) for i in range(k)]]


def test_measure_compares_the_plausible_languages_and_ranks_the_photo():
    searcher = _Searcher()
    # "two dogs": en most plausible, de a trained runner-up, af/nl/fil untrained: their answers differ
    m = bench.measure(searcher, "two dogs", "en", "p-en-3", 10)
    assert m == {"lang": "en", "decided_by": "plausible", "agreement": 0.0, "rank": 4, "oracle_rank": 4}
    assert bench.refused_at(m, 0.8) and not bench.refused_at(m, 0.0)
    # a caption without a photo has no rank; a language outside the served ones has no oracle
    m = bench.measure(searcher, "two dogs", "xh", None, 10)
    assert m["oracle_rank"] is None and m["rank"] is None
    m = bench.measure(searcher, "two dogs", "en", "p-de-0", 10)  # not in the top k: rank 0
    assert m["rank"] == 0 and m["oracle_rank"] == 0
    m = bench.measure(searcher, "Imbwa mbiri dziri kutamba mujecha", "sn", "p-en-0", 10)  # Shona: cannot read
    assert m["refused"] == "cannot read" and m["rank"] == 0 and bench.refused_at(m, 0.0)


def test_recall_counts_ranks_within_each_cut():
    assert bench.recall([1, 3, 7, 0], 10) == {"r1": 25.0, "r5": 50.0, "r10": 75.0, "mr": 50.0}
    assert bench.recall([1, 0], 1) == {"r1": 50.0, "mr": 50.0}


def test_summary_counts_a_refusal_as_a_miss_at_each_threshold():
    records = [
        {"lang": "en", "decided_by": "detection", "agreement": None, "rank": 1, "oracle_rank": 1},
        {"lang": "en", "decided_by": "plausible", "agreement": 0.5, "rank": 3, "oracle_rank": 2},
        {"lang": "nl", "decided_by": "plausible", "agreement": 0.9, "rank": 0, "oracle_rank": 9},
        {"refused": "cannot read", "message": "looks like Welsh", "rank": 0, "oracle_rank": 0},
    ]
    row = bench.summarise("en", records, strict=[False, True, True, True], k=10)
    assert row["captions"] == 4 and row["refusal_rate"] == 0.25  # at the default threshold, 0
    assert row["refusals_by_reason"] == {"cannot read": 1}
    assert row["recall"] == {"r1": 25.0, "r5": 50.0, "r10": 50.0, "mr": 41.67}
    assert row["oracle_recall"] == {"r1": 25.0, "r5": 50.0, "r10": 75.0, "mr": 50.0}
    assert row["recall_by_min_agreement"]["0.8"]["r5"] == 25.0
    assert row["refusal_rate_by_min_agreement"]["0.8"] == 0.5 and row["strict_rule_refusal_rate"] == 0.75
    assert row["searched_as_own_language"] == 0.6667
    assert row["decided_by"] == {"detection": 1, "plausible": 2} and row["examples_refused"] == ["looks like Welsh"]


def _row(mr: dict) -> dict:
    return {
        "recall_by_min_agreement": {t: {"mr": v} for t, v in mr.items()},
        "refusal_rate_by_min_agreement": {t: 0.0 for t in mr},
        "oracle_recall": {"mr": 20},
    }


def test_the_threshold_with_the_best_mean_mr_is_chosen_ties_to_the_higher():
    choice = bench.choose_threshold({"en": _row({"0.0": 20, "0.8": 10}), "es": _row({"0.0": 20, "0.8": 20})})
    assert (choice["min_agreement"], choice["mean_mr"], choice["oracle_mean_mr"]) == (0.0, 20, 20)
    choice = bench.choose_threshold({"en": _row({"0.0": 20, "0.8": 20})})
    assert choice["min_agreement"] == 0.8 and len(choice["by_threshold"]) == 2
    assert bench.choose_threshold({"en": {}}) is None
