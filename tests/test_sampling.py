import numpy as np
import pytest

from polyvse.sampling import DistinctPhotoBatchSampler


def make(counts, batch_size=8, seed=0):
    caption_photo = np.repeat(np.arange(len(counts)), counts)
    return caption_photo, DistinctPhotoBatchSampler(caption_photo, batch_size, seed=seed)


def test_batches_hold_distinct_photos_and_cover_every_caption():
    cp, s = make([1, 5, 2, 7, 3, 1, 1, 4, 2, 6, 1, 1], batch_size=5)
    batches = s.epoch_batches(0)
    for b in batches:
        assert len(set(cp[b])) == len(b), "a photo appears twice in one batch"
        assert 2 <= len(b) <= 5
    seen = sorted(i for b in batches for i in b)
    assert len(seen) == len(set(seen))
    # every caption is used except possibly a last lone one (a batch of one has no negatives)
    assert len(seen) >= len(cp) - 1


def test_order_depends_only_on_seed_and_epoch():
    _, s1 = make([3] * 20, seed=7)
    _, s2 = make([3] * 20, seed=7)
    _, s3 = make([3] * 20, seed=8)
    assert s1.epoch_batches(2) == s2.epoch_batches(2)
    assert s1.epoch_batches(2) != s1.epoch_batches(3)
    assert s1.epoch_batches(2) != s3.epoch_batches(2)


def test_one_photo_with_many_captions_never_shares_a_batch_with_itself():
    cp, s = make([30, 1, 1, 1], batch_size=4)
    for b in s.epoch_batches(0):
        assert len(set(cp[b])) == len(b)


def test_batch_size_one_is_refused():
    with pytest.raises(ValueError, match="negatives"):
        DistinctPhotoBatchSampler([0, 1], batch_size=1)
