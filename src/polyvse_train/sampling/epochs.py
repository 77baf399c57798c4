"""How an epoch is made from a batch sampler: on a subset of the captions, in stages,
or as several passes. Like the samplers, every wrapper's batches depend only on (seed, epoch), so resumed
runs stay identical to uninterrupted ones.

    CaptionSubsetSampler   batches over some captions only (e.g. one language), as indices of all captions
    DrawnCaptionsSampler   batches over k captions of each photo and language drawn anew each epoch, so an
                           epoch costs what k captions a photo cost while the epochs together see them all
    StagedSampler          one sampler before ``switch_epoch``, another from it on (the Translator's source
                           and target stages)
    RepeatedPassSampler    an epoch of at least ``min_batches`` batches: passes over the captions repeated and
                           cut at ``min_batches``, so a learning curve trains the same number of steps with
                           100 captions as with all of them
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np


class CaptionSubsetSampler:
    """``make(caption_photo_of_subset)`` builds a sampler over the captions ``subset`` (indices into all
    captions); its batches are mapped back to indices into all captions. For samplers whose batches are
    lists of caption indices (``DistinctPhotoBatchSampler``)."""

    def __init__(self, caption_photo, subset, make: Callable):
        self.subset = np.asarray(subset, dtype=np.int64)
        if len(self.subset) == 0:
            raise ValueError("the caption subset is empty: nothing to train on")
        self.base = make(np.asarray(caption_photo)[self.subset])

    def epoch_batches(self, epoch: int) -> list[list[int]]:
        return [[int(self.subset[i]) for i in batch] for batch in self.base.epoch_batches(epoch)]

    def __len__(self) -> int:
        return len(self.epoch_batches(0))


class DrawnCaptionsSampler:
    """Each epoch, ``k`` captions of every group (a photo and language: ``caption_group`` gives each caption's
    group) drawn at random from (seed, epoch) alone, all of a group that has ``k`` or fewer; ``make`` builds
    the sampler over the drawn captions (as ``CaptionSubsetSampler``'s) and its batches come back as indices
    into all captions. An epoch holds one row per group at ``k`` = 1, as training on a photo's first caption
    does, yet each epoch draws again, so a photo's other captions are trained on too."""

    def __init__(self, caption_photo, caption_group, k: int, make: Callable, seed: int = 0):
        if k < 1:
            raise ValueError(f"k must be >= 1 captions per group, got {k}")
        self.caption_photo = np.asarray(caption_photo)
        _, self.group = np.unique(np.asarray(caption_group), return_inverse=True)
        if len(self.group) != len(self.caption_photo):
            raise ValueError(f"{len(self.group)} caption groups for {len(self.caption_photo)} captions")
        if len(self.group) == 0:
            raise ValueError("no caption to draw from: nothing to train on")
        self.k, self.make, self.seed = int(k), make, int(seed)

    def drawn(self, epoch: int) -> np.ndarray:
        """The captions of ``epoch`` (sorted indices): a random order within each group, its first ``k`` kept."""
        rng = np.random.default_rng([self.seed, epoch, 1])  # a stream apart from the batch order's
        order = np.lexsort((rng.random(len(self.group)), self.group))  # by group, randomly within it
        groups = self.group[order]
        starts = np.searchsorted(groups, groups)  # where each row's group begins in ``order``
        return np.sort(order[np.arange(len(order)) - starts < self.k])

    def epoch_batches(self, epoch: int) -> list[list[int]]:
        return CaptionSubsetSampler(self.caption_photo, self.drawn(epoch), self.make).epoch_batches(epoch)

    def __len__(self) -> int:
        return len(self.epoch_batches(0))


class StagedSampler:
    """``first`` for epochs ``< switch_epoch``, ``second`` from ``switch_epoch`` on."""

    def __init__(self, first, second, switch_epoch: int):
        if switch_epoch < 0:
            raise ValueError(f"switch_epoch must be >= 0, got {switch_epoch}")
        self.first, self.second, self.switch_epoch = first, second, int(switch_epoch)

    def epoch_batches(self, epoch: int) -> list:
        return (self.first if epoch < self.switch_epoch else self.second).epoch_batches(epoch)


class RepeatedPassSampler:
    """An epoch = passes of ``base`` until ``min_batches`` batches (pass ``p`` of epoch ``e`` is the base's
    epoch ``e * passes + p``, ``passes`` = ceil(min_batches / batches of a pass) + 1), cut at
    ``min_batches``. When one pass already has ``min_batches`` batches or more, an epoch is exactly the base's
    epoch."""

    def __init__(self, base, min_batches: int):
        if min_batches < 1:
            raise ValueError(f"min_batches must be >= 1, got {min_batches}")
        self.base, self.min_batches = base, int(min_batches)
        per_pass = len(base.epoch_batches(0))
        if per_pass == 0:
            raise ValueError("the sampler gives no batch: too few captions for in-batch negatives")
        # one spare pass: a pass may have a batch less than the first (captions deferred to keep photos distinct)
        self.passes = 1 if per_pass >= self.min_batches else math.ceil(self.min_batches / per_pass) + 1

    def epoch_batches(self, epoch: int) -> list:
        if self.passes == 1:
            return self.base.epoch_batches(epoch)
        out: list = []
        for p in range(self.passes):
            if len(out) >= self.min_batches:
                break
            out += self.base.epoch_batches(epoch * self.passes + p)
        return out[: self.min_batches]

    def __len__(self) -> int:
        return len(self.epoch_batches(0))
