"""polyvse_train.data.training_captions: which captions a run trains on (corpus limit, translation augmentation)."""

from __future__ import annotations

from collections import Counter

import pytest

from polyvse.data.exclusion import EvaluationExclusion
from polyvse.data.f8kml import load_f8kml
from polyvse.errors import DataError
from polyvse_train.config import TrainConfig
from polyvse_train.data import training_captions

TRAIN = {"100", "700"}
# the caption budget alone (the exclusion set has its own tests: test_evaluation_exclusion.py)
NO_EXCLUSION = EvaluationExclusion(frozenset(), frozenset())


def _captions(tiny_root, **data):
    cfg = TrainConfig.from_dict({"data": {"languages": ["en", "de", "zh"], **data}})
    return training_captions(cfg, tiny_root, load_f8kml(tiny_root), TRAIN, NO_EXCLUSION)


def _count(caps):
    return Counter((c.photo_id, c.lang, c.source) for c in caps)


def test_translations_survive_the_caption_budget(tiny_root):
    # the f8k-full zoo's budget keeps the first caption of each photo and language; the translations are
    # extra captions by design and must not be dropped in favour of the photo's native zh caption
    one = _count(_captions(tiny_root, captions_per_photo=1, augment_translations=["zhb", "zhg"]))
    assert one[("100", "zh", "flickr8kcn-zhc")] == 1
    assert one[("100", "zh", "flickr8kcn-zhb")] == 1 and one[("100", "zh", "flickr8kcn-zhg")] == 1
    assert all(n == 1 for n in one.values())
    zhb = [
        c.text
        for c in _captions(tiny_root, captions_per_photo=1, augment_translations=["zhb"])
        if c.source == "flickr8kcn-zhb"
    ]
    assert zhb == ["百度100号0。", "百度700号0。"]  # the translation of each photo's first English caption
    assert not any(c.photo_id not in TRAIN for c in _captions(tiny_root, augment_translations=["zhb", "zhg"]))


def test_without_augmentation_the_budget_is_per_photo_and_language(tiny_root):
    all_caps = _captions(tiny_root)
    one = _captions(tiny_root, captions_per_photo=1)
    assert not any(c.source.startswith("flickr8kcn-zh") and c.source != "flickr8kcn-zhc" for c in all_caps)
    assert Counter((c.photo_id, c.lang) for c in one) == {k: 1 for k in {(c.photo_id, c.lang) for c in all_caps}}
    assert one == [c for c in all_caps if c in one]  # the first ones, in corpus order
    full = _count(_captions(tiny_root, augment_translations=["zhb"]))
    assert full[("100", "zh", "flickr8kcn-zhb")] == 5


def test_translations_are_the_datasets_and_need_their_language():
    """The translations a run may add are its dataset's (DatasetSpec.translations): the config names them."""
    with pytest.raises(DataError, match="data.augment_translations: zhb translates into zh: add it to languages"):
        TrainConfig.from_dict({"data": {"languages": ["en", "de"], "augment_translations": ["zhb"]}})
    with pytest.raises(DataError, match="'zhm': dataset f8k-ml has the machine translations zhb, zhg"):
        TrainConfig.from_dict({"data": {"augment_translations": ["zhm"]}})
    with pytest.raises(DataError, match="dataset multi30k has the machine translations \\(none\\)"):
        TrainConfig.from_dict({"data": {"dataset": "multi30k", "augment_translations": ["zhb"]}})
    assert TrainConfig.from_dict({"data": {"dataset": "f8k-full", "augment_translations": ["zhb", "zhg"]}})
