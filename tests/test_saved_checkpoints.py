"""Checkpoints written by earlier code load and embed as they did: tests/data/checkpoints/ holds tiny checkpoints of
each kind (word-level text branches; random heads on the frozen towers with an adapted language and CSLS banks),
written before polyvse's modules moved (tests/data/checkpoints/MADE.json names the commit and the command), with
what that code embedded for fixed queries and image features. A checkpoint stores no module paths, so moving a
module must change none of this."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import polyvse
from polyvse.model.loading import query_model

DATA = Path(__file__).resolve().parent / "data" / "checkpoints"
MADE = json.loads((DATA / "MADE.json").read_text(encoding="utf-8"))
EXPECTED = dict(np.load(DATA / "expected.npz"))


def queries(helper: str) -> list[tuple[str, str]]:
    if helper == "trained":
        from test_text_query import QUERIES
    else:
        from test_tower_query import QUERIES
    return list(QUERIES)


def test_every_kind_is_at_hand_and_small():
    assert MADE["commit"] and set(MADE["kinds"]) == {p.name for p in DATA.iterdir() if p.is_dir()}
    assert sum(p.stat().st_size for p in DATA.rglob("*") if p.is_file()) < 2**20


@pytest.mark.parametrize("name", sorted(MADE["kinds"]))
def test_a_checkpoint_written_before_the_move_embeds_as_it_did(name):
    path, helper = DATA / name, MADE["kinds"][name]["helper"]
    model = polyvse.load(path, device="cpu")
    numpy_model = query_model(path)
    want = {k.split("/", 1)[1]: v for k, v in EXPECTED.items() if k.startswith(name + "/")}
    np.testing.assert_allclose(model.encode_image_features(want["image_features"]), want["image"], atol=1e-5)
    for i, (lang, text) in enumerate(queries(helper)):
        np.testing.assert_allclose(model.encode_text([text], lang), want[f"torch_text_{i}"], atol=1e-5)
        if f"numpy_text_{i}" in want:
            assert numpy_model is not None, name
            np.testing.assert_allclose(numpy_model.encode_text([text], lang), want[f"numpy_text_{i}"], atol=1e-5)
    assert any(k.startswith("numpy_text_") for k in want)  # each kind has its torch-free path too
