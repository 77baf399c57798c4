"""STS: the SemEval reader (polyvse.data.sts) and Pearson r x 100 of cosines (polyvse.evaluation.sts)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from polyvse.data.sts import STS_SETS, load_sts, read_sts
from polyvse.errors import DataError
from polyvse.evaluation.sts import STS_KEYS, cosine_rows, evaluate_sts, pearson, sts_pearson


class BinaryBagOfWords:
    """The SemEval STS shared-task baseline as a "model": binary bag of whitespace tokens (case kept)."""

    languages = ["en"]

    def __init__(self):
        self.calls = []

    def encode_text(self, texts, lang):
        self.calls.append((len(texts), lang))
        vocab: dict[str, int] = {}
        toks = [set(t.split()) for t in texts]
        for ts in toks:
            for w in sorted(ts):
                vocab.setdefault(w, len(vocab))
        m = np.zeros((len(texts), len(vocab)), dtype=np.float32)
        for i, ts in enumerate(toks):
            m[i, [vocab[w] for w in ts]] = 1.0
        return m


# ------------------------------------------------------------------------------------- hand-computed

# cos(a, b) = 1, cos(c, d) = 0, cos(e, f) = 1/2 (f at 60 degrees from e)
VECS = {
    "a": [1.0, 0.0],
    "b": [2.0, 0.0],
    "c": [1.0, 0.0],
    "d": [0.0, 3.0],
    "e": [1.0, 0.0],
    "f": [0.5, math.sqrt(3) / 2],
}
PAIRS = [("a", "b"), ("c", "d"), ("e", "f")]


def _encode(texts):
    return np.array([VECS[t] for t in texts])


def test_sts_pearson_hand_computed():
    # predictions x = (1, 0, 1/2)
    assert sts_pearson(_encode, PAIRS, [4.0, 0.0, 2.0]) == pytest.approx(100.0)  # gold = 4x: r = 1
    assert sts_pearson(_encode, PAIRS, [0.0, 4.0, 2.0]) == pytest.approx(-100.0)  # gold = 4 - 4x
    # gold (2, 0, 2): dx = (1/2, -1/2, 0), dy = (2/3, -4/3, 2/3); sum dx*dy = 1,
    # |dx| = sqrt(1/2), |dy| = sqrt(24/9)  ->  r = 1 / sqrt(12/9) = sqrt(3)/2
    assert sts_pearson(_encode, PAIRS, [2.0, 0.0, 2.0]) == pytest.approx(100 * math.sqrt(3) / 2)


def test_each_distinct_sentence_is_encoded_once():
    seen = []

    def enc(texts):
        seen.append(list(texts))
        return _encode(texts)

    sts_pearson(enc, PAIRS + [("a", "f")], [4.0, 0.0, 2.0, 1.0])
    assert len(seen) == 1 and sorted(seen[0]) == sorted(set(seen[0])) == ["a", "b", "c", "d", "e", "f"]


def test_cosine_rows_and_pearson_edge_cases():
    np.testing.assert_allclose(cosine_rows([[1, 0], [0, 0]], [[3, 4], [1, 1]]), [0.6, 0.0])
    with pytest.warns(RuntimeWarning, match="all predicted similarities are equal"):
        assert math.isnan(pearson([0.3, 0.3, 0.3], [1, 2, 3]))
    with pytest.raises(ValueError, match="gold scores are all equal"):
        pearson([0.1, 0.2], [3, 3])
    with pytest.raises(ValueError, match="NaN"):
        pearson([float("nan"), 0.2], [1, 3])
    with pytest.raises(ValueError, match="3 pairs but gold"):
        sts_pearson(_encode, PAIRS, [1.0, 2.0])
    with pytest.raises(ValueError, match="encode_fn returned shape"):
        sts_pearson(lambda t: np.zeros((1, 2)), PAIRS, [1.0, 2.0, 3.0])


# ------------------------------------------------------------------------------------------- reader


def _write_set(tmp_path, inputs: str, gold: str):
    i, g = tmp_path / "STS.input.x.txt", tmp_path / "STS.gs.x.txt"
    i.write_text(inputs, encoding="utf-8")
    g.write_text(gold, encoding="utf-8")
    return i, g


def test_reader_skips_unscored_pairs_and_keeps_line_numbers(tmp_path):
    i, g = _write_set(tmp_path, "A b.\tA c.\nD e.\tF g.\nH i.\tH j.\n", "4.2\n\n0\n")
    s = read_sts(i, g)
    assert s.pairs == (("A b.", "A c."), ("H i.", "H j."))
    np.testing.assert_array_equal(s.gold, [4.2, 0.0])
    assert s.lines == (1, 3) and s.n_unscored == 1 and len(s) == 2


@pytest.mark.parametrize(
    "inputs, gold, where, match",
    [
        ("A b.\tA c.\nno tab here\n", "1\n2\n", "input:2", "two sentences separated by one tab, found 1"),
        ("A b.\tA c.\tD\n", "1\n", "input:1", "found 3 field"),
        ("A b.\t \n", "1\n", "input:1", "second sentence of the pair is empty"),
        ("A b.\tA c.\nA\tB\n", "1\nabc\n", "gs:2", "'abc' is not a number"),
        ("A b.\tA c.\n", "5.5\n", "gs:1", "outside \\[0, 5\\]"),
        ("A b.\tA c.\n", "nan\n", "gs:1", "outside"),
        ("A b.\tA c.\nA\tB\n", "1\n", "input", "2 sentence pairs but 1 gold lines"),
        ("A b.\tA c.\n", "\n", "gs", "every gold line is empty"),
        ("", "", "input", "no sentence pairs"),
    ],
)
def test_reader_errors_name_file_and_line(tmp_path, inputs, gold, where, match):
    i, g = _write_set(tmp_path, inputs, gold)
    with pytest.raises(DataError, match=match) as exc:
        read_sts(i, g)
    name, _, line = where.partition(":")
    path = str(i if name == "input" else g)
    assert str(exc.value).startswith(path + (f":{line}: " if line else ": "))


def test_missing_files_and_unknown_set(tmp_path):
    with pytest.raises(DataError, match="STS input file not found"):
        read_sts(tmp_path / "nope.txt", tmp_path / "gs.txt")
    with pytest.raises(DataError, match="unknown STS set 'sts16'"):
        load_sts(tmp_path, "sts16")
    with pytest.raises(DataError, match="STS data folder"):
        load_sts(tmp_path, "sts14-images")


def test_evaluate_sts_on_a_small_root_by_hand(tmp_path):
    root = tmp_path / "data"
    for name, (folder, infix) in STS_SETS.items():
        d = root / "sts" / folder
        d.mkdir(parents=True)
        # binary bag of words: cos = 1, 0, 2 / (2 * 2) = 1/2 (2 of 4 tokens shared), plus an unscored line
        (d / f"STS.input.{infix}.txt").write_text(
            "a dog runs\ta dog runs\nred car\tblue sky\nx y z w\tx y q r\nunscored line\there\n", encoding="utf-8"
        )
        # same cosines as test_sts_pearson_hand_computed: r = 1, -1, sqrt(3)/2
        gold = {"sts12-msrvid": "4\n0\n2\n\n", "sts14-images": "0\n4\n2\n\n", "sts15-images": "2\n0\n2\n\n"}[name]
        (d / f"STS.gs.{infix}.txt").write_text(gold, encoding="utf-8")
    model = BinaryBagOfWords()
    r = evaluate_sts(model, root)
    assert list(r) == list(STS_KEYS) == ["sts12-msrvid", "sts14-images", "sts15-images"]
    assert r["sts12-msrvid"] == pytest.approx(100.0)
    assert r["sts14-images"] == pytest.approx(-100.0)
    assert r["sts15-images"] == pytest.approx(100 * math.sqrt(3) / 2)
    assert all(lang == "en" for _, lang in model.calls)
    # the sts folder itself is accepted as root too
    assert evaluate_sts(model, root / "sts", sets=["sts12-msrvid"]) == {"sts12-msrvid": pytest.approx(100.0)}


# ---------------------------------------------------------------------------------------- real data


@pytest.mark.slow
def test_real_sts_files(shared_data):
    counts = {"sts12-msrvid": (750, 0), "sts14-images": (750, 0), "sts15-images": (750, 750)}
    for name, (n, unscored) in counts.items():
        s = load_sts(shared_data, name)
        lines = (
            (shared_data / "sts" / STS_SETS[name][0] / f"STS.input.{STS_SETS[name][1]}.txt")
            .read_text(encoding="utf-8")
            .splitlines()
        )
        assert len(s) == n and s.n_unscored == unscored and len(lines) == n + unscored
        assert s.gold.min() >= 0.0 and s.gold.max() <= 5.0 and s.gold.min() == 0.0 and s.gold.max() == 5.0
        assert tuple(lines[k - 1].split("\t")[0] for k in s.lines[:3]) == tuple(p[0] for p in s.pairs[:3])
    first = load_sts(shared_data, "sts12-msrvid").pairs[0]
    assert first == ("A man with a hard hat is dancing.", "A man wearing a hard hat is dancing.")


@pytest.mark.slow
def test_real_sts_binary_bag_of_words_reproduces_the_shared_task_baseline(shared_data):
    """The official SemEval baseline (binary bag-of-words cosine) is 29.9 / 51.3 / 60.4 (Gella et al.
    Table 4): the reader, the skipping of unscored 2015 lines and the Pearson code together give it."""
    r = evaluate_sts(BinaryBagOfWords(), shared_data)
    assert r["sts12-msrvid"] == pytest.approx(29.9, abs=0.1)
    assert r["sts14-images"] == pytest.approx(51.3, abs=0.1)
    assert r["sts15-images"] == pytest.approx(60.4, abs=0.1)
