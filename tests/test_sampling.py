import numpy as np
import pytest

from polyvse_train.sampling import DistinctPhotoBatchSampler


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


def drawn_sampler(counts, k, batch_size=4, seed=0):
    from polyvse_train.sampling import DrawnCaptionsSampler

    caption_photo = np.repeat(np.arange(len(counts)), counts)
    return caption_photo, DrawnCaptionsSampler(
        caption_photo, caption_photo, k, lambda cp: DistinctPhotoBatchSampler(cp, batch_size, seed=seed), seed=seed
    )


def test_drawn_captions_hold_k_of_each_group_and_change_with_the_epoch():
    counts = [5, 1, 3, 2, 5, 4]
    cp, s = drawn_sampler(counts, k=2)
    per_epoch = [s.drawn(e) for e in range(30)]
    for rows in per_epoch:
        assert np.bincount(cp[rows], minlength=len(counts)).tolist() == [min(2, c) for c in counts]
    assert len({tuple(r) for r in per_epoch}) > 1  # drawn anew each epoch ...
    assert set(np.concatenate(per_epoch)) == set(range(len(cp)))  # ... so the epochs see every caption
    _, again = drawn_sampler(counts, k=2)
    assert again.epoch_batches(7) == s.epoch_batches(7)  # (seed, epoch) alone: a resumed run is exact
    _, other_seed = drawn_sampler(counts, k=2, seed=1)
    assert [other_seed.drawn(e).tolist() for e in range(5)] != [s.drawn(e).tolist() for e in range(5)]


def test_drawn_captions_are_batched_by_the_sampler_made_over_them():
    cp, s = drawn_sampler([4, 4, 4, 4, 4, 4, 4, 4], k=1, batch_size=3)
    batches = s.epoch_batches(3)
    rows = sorted(i for b in batches for i in b)
    assert rows == s.drawn(3).tolist()  # indices into all captions, one of each photo
    for b in batches:
        assert len(set(cp[b])) == len(b) <= 3
    with pytest.raises(ValueError, match="k must be"):
        drawn_sampler([2, 2], k=0)


def test_vse_draws_per_photo_and_language():
    """objective.vse.draw_captions: the groups are (photo, language), so a photo keeps one caption of each of
    its languages an epoch."""
    from types import SimpleNamespace

    from polyvse_train.objectives.vse import VseObjective

    photo_row = np.array([0, 0, 0, 0, 1, 1, 1, 2])
    langs = ["en", "en", "de", "de", "en", "en", "zh", "en"]
    stub = SimpleNamespace(
        data=SimpleNamespace(train=SimpleNamespace(photo_row=photo_row, langs=langs)),
        options=SimpleNamespace(draw_captions=1),
        cfg=SimpleNamespace(schedule=SimpleNamespace(seed=0)),
        make_sampler=lambda cp: DistinctPhotoBatchSampler(cp, 2, seed=0),
    )
    sampler = VseObjective.batch_sampler(stub)
    for epoch in range(5):
        rows = sampler.drawn(epoch)
        assert sorted((int(photo_row[r]), langs[r]) for r in rows) == [
            (0, "de"),
            (0, "en"),
            (1, "en"),
            (1, "zh"),
            (2, "en"),
        ]
    stub.options.draw_captions = 0
    assert isinstance(VseObjective.batch_sampler(stub), DistinctPhotoBatchSampler)
