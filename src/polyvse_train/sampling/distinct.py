"""Caption batches of distinct photos (objective vse): in-batch negatives without false negatives."""

from __future__ import annotations

from collections import deque

import numpy as np


class DistinctPhotoBatchSampler:
    """Shuffles all captions each epoch and packs them into batches in which no photo appears twice.

    In-batch negatives are the other captions of the batch; a second caption of the same photo would be a
    false negative, so it waits for the next batch instead. The order of an epoch depends only on
    (seed, epoch), which is what makes a resumed run identical to an uninterrupted one.
    """

    def __init__(self, caption_photo: list[int] | np.ndarray, batch_size: int, seed: int = 0, drop_last: bool = False):
        if batch_size < 2:
            raise ValueError("batch_size must be >= 2: the hinge loss needs in-batch negatives")
        self.caption_photo = np.asarray(caption_photo)
        self.batch_size = batch_size
        self.seed = seed
        self.drop_last = drop_last

    def epoch_batches(self, epoch: int) -> list[list[int]]:
        rng = np.random.default_rng([self.seed, epoch])
        order = rng.permutation(len(self.caption_photo))
        batches: list[list[int]] = []
        waiting: deque[int] = deque()
        batch: list[int] = []
        photos: set[int] = set()

        def add(idx: int) -> bool:
            if len(batch) >= self.batch_size or self.caption_photo[idx] in photos:
                return False
            batch.append(idx)
            photos.add(self.caption_photo[idx])
            return True

        def fill_from_waiting() -> None:
            for _ in range(len(waiting)):
                w = waiting.popleft()
                if not add(w):
                    waiting.append(w)

        for idx in order:
            if not batch:  # deferred captions get the first places of each new batch
                fill_from_waiting()
            if not add(int(idx)):
                waiting.append(int(idx))
            if len(batch) == self.batch_size:
                batches.append(batch)
                batch, photos = [], set()
        while True:
            fill_from_waiting()
            if not batch:
                break
            batches.append(batch)
            batch, photos = [], set()
        if self.drop_last:
            batches = [b for b in batches if len(b) == self.batch_size]
        # A batch of one has no negatives; its caption simply waits for the next epoch.
        return [b for b in batches if len(b) >= 2]

    def __len__(self) -> int:
        return len(self.epoch_batches(0))
