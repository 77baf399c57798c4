"""MULE's group-balanced sampler: groups of photos by their languages, equal shares per batch."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from polyvse_train.sampling import GroupBalancedBatchSampler, PhotoTupleBatchSampler


def coco_like(n_en=50, n_ja=20, n_zh=10):
    """Photos 0..: English-only, English-Japanese, English-Chinese (as MULE's COCO groups); 5 en captions
    each, 5 ja for the ja group, 1-2 zh for the zh group. Photo ids are shuffled so groups interleave."""
    rng = np.random.default_rng(123)
    ids = rng.permutation(n_en + n_ja + n_zh) + 1000
    caption_photo, caption_lang, group_of = [], [], {}
    for i, p in enumerate(ids):
        group = "en" if i < n_en else "en+ja" if i < n_en + n_ja else "en+zh"
        group_of[int(p)] = group
        langs = (
            ["en"] * 5 + (["ja"] * 5 if group == "en+ja" else []) + (["zh"] * (1 + i % 2) if group == "en+zh" else [])
        )
        caption_photo += [int(p)] * len(langs)
        caption_lang += langs
    return np.array(caption_photo), caption_lang, group_of


QUOTAS = {"en": 2, "ja": 2, "zh": 1}


@pytest.mark.parametrize("batch_size", [12, 14, 16, 7])
def test_every_photo_drawn_and_groups_balanced_per_batch(batch_size):
    cp, cl, group_of = coco_like()
    s = GroupBalancedBatchSampler(cp, cl, QUOTAS, batch_size, seed=3)
    assert s.group_sizes() == {"en": 50, "en+ja": 20, "en+zh": 10}
    for epoch in range(3):
        batches = s.epoch_batches(epoch)
        assert len(batches) == len(s)
        drawn = Counter()
        for photos, slots in batches:
            assert len(set(photos.tolist())) == len(photos), "a photo twice in one batch"
            assert len(photos) <= batch_size
            per_group = Counter(group_of[int(p)] for p in photos)
            assert set(per_group) == {"en", "en+ja", "en+zh"}
            assert max(per_group.values()) - min(per_group.values()) <= 1, per_group
            drawn.update(photos.tolist())
            # slots hold captions of the right photo and language; missing languages are -1
            for row, p in enumerate(photos):
                for j, lang in enumerate(s.slot_langs):
                    c = slots[row, j]
                    if c >= 0:
                        assert cp[c] == p and cl[c] == lang
                    else:
                        assert lang not in group_of[int(p)].split("+")
        assert set(drawn) == set(group_of), "every photo is drawn every epoch"
        # the small groups are oversampled, as in MULE
        assert min(drawn[p] for p, g in group_of.items() if g == "en+zh") > max(
            drawn[p] for p, g in group_of.items() if g == "en"
        )


def test_batches_use_the_whole_batch_size_when_groups_allow():
    cp, cl, _ = coco_like()
    s = GroupBalancedBatchSampler(cp, cl, QUOTAS, 14, seed=0)
    assert (s.share, s.extra) == (4, 2)
    assert all(len(p) == 14 for p, _ in s.epoch_batches(0))
    # a group smaller than its share caps every share: distinct photos per batch
    s = GroupBalancedBatchSampler(cp, cl, QUOTAS, 60, seed=0)
    assert s.share == 10 and s.extra == 0 and len(s) == 5
    assert all(len(p) == 30 for p, _ in s.epoch_batches(0))


def test_deterministic_per_seed_and_epoch():
    cp, cl, _ = coco_like()
    a = GroupBalancedBatchSampler(cp, cl, QUOTAS, 12, seed=5)
    b = GroupBalancedBatchSampler(cp, cl, QUOTAS, 12, seed=5)

    def same(x, y):
        return len(x) == len(y) and all(np.array_equal(p, q) and np.array_equal(s, t) for (p, s), (q, t) in zip(x, y))

    # a resumed run rebuilds the sampler and asks for the same epoch: identical batches, in any order of calls
    assert same(a.epoch_batches(2), b.epoch_batches(2))
    assert same(a.epoch_batches(0), a.epoch_batches(0))
    assert not same(a.epoch_batches(0), a.epoch_batches(1))
    assert not same(a.epoch_batches(0), GroupBalancedBatchSampler(cp, cl, QUOTAS, 12, seed=6).epoch_batches(0))


def test_one_group_is_the_plain_tuple_sampler_order_free():
    cp, cl, _ = coco_like(n_en=30, n_ja=0, n_zh=0)
    s = GroupBalancedBatchSampler(cp, cl, {"en": 2}, 8, seed=0)
    assert s.group_sizes() == {"en": 30} and len(s) == 4
    drawn = [p for photos, _ in s.epoch_batches(0) for p in photos.tolist()]
    assert set(drawn) == set(cp.tolist()) and len(drawn) == 32  # the last batch tops up from a new pass
    assert len(PhotoTupleBatchSampler(cp, cl, {"en": 2}, 8).epoch_batches(0)) == 4


def test_batch_smaller_than_number_of_groups_is_an_error():
    cp, cl, _ = coco_like()
    with pytest.raises(ValueError, match="smaller than the number of photo groups"):
        GroupBalancedBatchSampler(cp, cl, QUOTAS, 2)


def test_trainer_rejects_group_balanced_with_caption_batches():
    from polyvse.errors import DataError
    from polyvse_train.config import TrainConfig

    with pytest.raises(
        DataError, match="objective.sampler: an option of objective pivot, parallel, mlmme, mule, not of vse"
    ):
        TrainConfig.from_dict(dict(objective="vse", sampler="group_balanced"))
    with pytest.raises(DataError, match="objective.pivot.sampler: 'balanced': use one of distinct, group_balanced"):
        TrainConfig.from_dict(dict(objective="pivot", sampler="balanced"))
