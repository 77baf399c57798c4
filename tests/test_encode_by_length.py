"""A model with an e5 tail embeds texts in batches of about one token count (each batch is padded to its longest
text, and attention runs over that), and gives each text the vector it gets alone, in the texts' order: trained,
zero-shot and adapted languages alike."""

from __future__ import annotations

import numpy as np
import pytest

import polyvse
from test_tower_query import tower_checkpoint

TEXTS = [
    "a dog",
    "two dogs play in the snow while a man in a red jacket watches them from the edge of the frozen lake",
    "snow",
    "a child in a yellow coat runs",
    "people",
    "a very long sentence " * 12,
]


@pytest.fixture(scope="module")
def tail_model(tmp_path_factory):
    return polyvse.load(tower_checkpoint(tmp_path_factory.mktemp("tail") / "checkpoint", text_tail_layers=1))


@pytest.mark.parametrize("lang", ["en", "fr", "es"])  # trained, zero-shot, adapted
def test_vectors_are_each_texts_own_in_the_texts_order(tail_model, lang, monkeypatch):
    monkeypatch.setattr(tail_model, "batch_size", 2)
    widths = []
    pad = tail_model.captions.pad

    def recording_pad(rows):
        x, lengths = pad(rows)
        widths.append(x.shape[1])
        return x, lengths

    monkeypatch.setattr(tail_model.captions, "pad", recording_pad)
    together = tail_model.encode_text(TEXTS, lang)
    assert widths == sorted(widths) and len(widths) == 3  # shortest batch first, each padded to its own longest
    alone = np.concatenate([tail_model.encode_text([t], lang) for t in TEXTS])
    np.testing.assert_allclose(together, alone, rtol=1e-4, atol=1e-5)
