"""How an epoch is made from a batch sampler: on a subset of the captions, in stages,
or as several passes. Like the samplers, every wrapper's batches depend only on (seed, epoch), so resumed
runs stay identical to uninterrupted ones.

    CaptionSubsetSampler   batches over some captions only (e.g. one language), as indices of all captions
    StagedSampler          one sampler before ``switch_epoch``, another from it on (the Translator's source
                           and target stages)
    RepeatedPassSampler    an epoch of at least ``min_batches`` batches: passes over the captions repeated and
                           cut at ``min_batches``, so a learning curve trains the same number of steps with
                           100 captions as with all of them
"""
from __future__ import annotations

import math
from typing import Callable

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
