"""Batches of distinct photos, each with its captions per language (objectives pivot, parallel, mlmme, mule)."""

from __future__ import annotations

import numpy as np

from .slots import CaptionSlots


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

    def __init__(
        self,
        caption_photo,
        caption_lang,
        quotas: dict[str, int],
        batch_size: int,
        seed: int = 0,
        drop_last: bool = False,
    ):
        if batch_size < 2:
            raise ValueError("batch_size must be >= 2: the ranking losses need in-batch negatives")
        self.slots = CaptionSlots(caption_photo, caption_lang, quotas)
        self.quotas, self.slot_langs = self.slots.quotas, self.slots.slot_langs
        self.photos = self.slots.owners
        self.batch_size, self.seed, self.drop_last = batch_size, seed, drop_last

    def epoch_batches(self, epoch: int) -> list[tuple[np.ndarray, np.ndarray]]:
        rng = np.random.default_rng([self.seed, epoch])
        order = rng.permutation(len(self.photos))
        slots = self.draw_slots(rng, order)
        batches = []
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            if len(rows) < 2 or (self.drop_last and len(rows) < self.batch_size):
                continue
            batches.append((self.photos[rows], slots[start : start + self.batch_size]))
        return batches

    def draw_slots(self, rng: np.random.Generator, photo_idx) -> np.ndarray:
        """(len(photo_idx), S) caption indices for photos ``self.photos[photo_idx]`` (``CaptionSlots.draw``)."""
        return self.slots.draw(rng, photo_idx)

    def __len__(self) -> int:
        n = len(self.photos)
        full, rest = divmod(n, self.batch_size)
        return full + (1 if rest >= 2 and not self.drop_last else 0)
