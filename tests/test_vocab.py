"""polyvse.text.vocab.Vocabulary."""

from __future__ import annotations

import json

import pytest

from polyvse.errors import DataError
from polyvse.text.vocab import PAD, PAD_TOKEN, UNK, UNK_TOKEN, Vocabulary

DATA = [["a", "dog", "runs"], ["a", "cat", "runs"], ["a", "dog"], ["zebra"]]


def test_specials_and_order():
    v = Vocabulary.build(DATA)
    assert (PAD, UNK) == (0, 1)
    assert v.id_to_token(0) == PAD_TOKEN and v.id_to_token(1) == UNK_TOKEN
    # by descending count, ties by token
    assert v.tokens == [PAD_TOKEN, UNK_TOKEN, "a", "dog", "runs", "cat", "zebra"]
    assert len(v) == 7


def test_encode_maps_unknown_to_unk():
    v = Vocabulary.build(DATA)
    assert v.encode(["a", "dog", "giraffe"]) == [2, 3, UNK]
    assert v.encode([]) == []
    assert v.decode([2, 3, 0, 0]) == ["a", "dog"]
    assert "dog" in v and "giraffe" not in v


def test_min_count_and_max_size():
    v = Vocabulary.build(DATA, min_count=2)
    assert v.tokens[2:] == ["a", "dog", "runs"]
    v = Vocabulary.build(DATA, max_size=2)
    assert v.tokens[2:] == ["a", "dog"] and len(v) == 4
    assert len(Vocabulary.build(DATA, max_size=0)) == 2
    with pytest.raises(ValueError):
        Vocabulary.build(DATA, min_count=0)


def test_deterministic_whatever_the_input_order():
    a = Vocabulary.build(DATA)
    b = Vocabulary.build(list(reversed(DATA)))
    assert a == b and a.fingerprint() == b.fingerprint()


def test_special_strings_in_text_are_not_regular_tokens():
    v = Vocabulary.build([[PAD_TOKEN, UNK_TOKEN, "x"]])
    assert v.tokens == [PAD_TOKEN, UNK_TOKEN, "x"]


def test_build_rejects_untokenized_strings():
    with pytest.raises(TypeError):
        Vocabulary.build(["a dog runs"])


def test_json_round_trip():
    v = Vocabulary.build(DATA)
    d = json.loads(json.dumps(v.to_dict()))
    w = Vocabulary.from_dict(d)
    assert w == v and w.fingerprint() == v.fingerprint()
    assert w.encode(["cat"]) == v.encode(["cat"])


def test_fingerprint_is_sha256_of_contents():
    v = Vocabulary.build(DATA)
    fp = v.fingerprint()
    assert len(fp) == 64 and int(fp, 16) >= 0
    assert Vocabulary.build(DATA + [["new"]]).fingerprint() != fp
    # same tokens, different ids -> different fingerprint
    assert Vocabulary(["dog", "a"]).fingerprint() != Vocabulary(["a", "dog"]).fingerprint()


def test_from_dict_rejects_foreign_or_tampered_data():
    v = Vocabulary.build(DATA)
    with pytest.raises(DataError):
        Vocabulary.from_dict({"tokens": ["a"]})
    d = v.to_dict()
    d["tokens"] = d["tokens"][::-1]
    with pytest.raises(DataError, match="fingerprint"):
        Vocabulary.from_dict(d)
    d = v.to_dict()
    d["version"] = 99
    with pytest.raises(DataError, match="version"):
        Vocabulary.from_dict(d)
    d = v.to_dict()
    d["tokens"] = ["a", "a"]
    del d["fingerprint"]
    with pytest.raises(DataError, match="duplicate"):
        Vocabulary.from_dict(d)


def test_duplicate_or_empty_tokens_rejected():
    with pytest.raises(ValueError):
        Vocabulary(["a", "a"])
    with pytest.raises(ValueError):
        Vocabulary([""])
