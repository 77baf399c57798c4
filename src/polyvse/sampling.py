"""Batch samplers: batches of distinct photos, reproducible from (seed, epoch) alone so runs can resume."""
from __future__ import annotations

from collections import deque

import numpy as np


class DistinctPhotoBatchSampler:
    """Shuffles all captions each epoch and packs them into batches in which no photo appears twice.

    In-batch negatives are the other captions of the batch; a second caption of the same photo would be a
    false negative, so it waits for the next batch instead. The order of an epoch depends only on
    (seed, epoch), which is what makes a resumed run identical to an uninterrupted one.
    """

    def __init__(self, caption_photo: list[int] | np.ndarray, batch_size: int, seed: int = 0,
                 drop_last: bool = False):
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


class PhotoTupleBatchSampler:
    """Batches of distinct photos, each carrying a fixed number of captions per language (a "tuple").

    ``quotas`` maps language -> captions per photo, e.g. MULE's {"en": 2, "de": 2, "fr": 1, "cs": 1} or
    one caption per language for PIVOT / PARALLEL / MLMME. A batch is ``(photo_rows (n,), slots (n, S))``
    where S = sum(quotas) and ``slots[i, s]`` is a caption index, or -1 when photo i has fewer captions in
    the slot's language than its quota: photos lacking a language keep their place and the losses mask the
    empty slots (``slot_langs[s]`` names each slot's language). Captions are drawn without replacement
    within a photo, fresh every epoch. An epoch visits every photo that has at least one caption in the
    quota languages once; its order depends only on (seed, epoch), so runs resume exactly.
    """

    def __init__(self, caption_photo, caption_lang, quotas: dict[str, int], batch_size: int, seed: int = 0,
                 drop_last: bool = False):
        if batch_size < 2:
            raise ValueError("batch_size must be >= 2: the ranking losses need in-batch negatives")
        if not quotas or any(int(q) < 1 for q in quotas.values()):
            raise ValueError(f"quotas must map languages to positive counts, got {quotas!r}")
        self.quotas = {lang: int(q) for lang, q in quotas.items()}
        self.slot_langs = [lang for lang, q in self.quotas.items() for _ in range(q)]
        self.batch_size, self.seed, self.drop_last = batch_size, seed, drop_last
        by_photo: dict[int, dict[str, list[int]]] = {}
        for idx, (photo, lang) in enumerate(zip(np.asarray(caption_photo).tolist(), caption_lang)):
            if lang in self.quotas:
                by_photo.setdefault(int(photo), {}).setdefault(lang, []).append(idx)
        self.photos = np.array(sorted(by_photo), dtype=np.int64)
        self._caps = [by_photo[int(p)] for p in self.photos]

    def epoch_batches(self, epoch: int) -> list[tuple[np.ndarray, np.ndarray]]:
        rng = np.random.default_rng([self.seed, epoch])
        order = rng.permutation(len(self.photos))
        slots = self.draw_slots(rng, order)
        batches = []
        for start in range(0, len(order), self.batch_size):
            rows = order[start:start + self.batch_size]
            if len(rows) < 2 or (self.drop_last and len(rows) < self.batch_size):
                continue
            batches.append((self.photos[rows], slots[start:start + self.batch_size]))
        return batches

    def draw_slots(self, rng: np.random.Generator, photo_idx) -> np.ndarray:
        """(len(photo_idx), S) caption indices for photos ``self.photos[photo_idx]``: per photo and language,
        up to the quota drawn without replacement; -1 where the photo has fewer captions."""
        slots = np.full((len(photo_idx), len(self.slot_langs)), -1, dtype=np.int64)
        for row, p in enumerate(photo_idx):
            col = 0
            for lang, q in self.quotas.items():
                caps = self._caps[p].get(lang, [])
                chosen = rng.permutation(len(caps))[:q] if caps else []
                for j, c in enumerate(chosen):
                    slots[row, col + j] = caps[c]
                col += q
        return slots

    def __len__(self) -> int:
        n = len(self.photos)
        full, rest = divmod(n, self.batch_size)
        return full + (1 if rest >= 2 and not self.drop_last else 0)
