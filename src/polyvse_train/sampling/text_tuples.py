"""Batches of text-only caption tuples, capped per epoch and interleaved with the image batches.

A text-only tuple is the captions of one photo without an image in the run (Multi30K, Flickr8K/8K-CN; see
``polyvse.data.text_tuples``). Its batches feed only the caption–caption terms (PARALLEL, R_ML, MULE's
neighbourhood constraints / LP); the image batches are unchanged. Everything depends only on
(seed, epoch), so a resumed run sees exactly the batches an uninterrupted one would.
"""

from __future__ import annotations

import numpy as np

from .slots import CaptionSlots

#: mixed into the RNG seeds so the text streams never coincide with the image sampler's (seed, epoch) stream
_ORDER_STREAM, _CAPTION_STREAM = 7001, 7002


class TextTupleBatchSampler:
    """At most ``per_epoch`` tuples per epoch, in batches of ``batch_size`` distinct tuples (the same
    in-batch negative count as the image batches, so the hinge sums have the same scale), each tuple with
    ``quotas[lang]`` captions per language drawn afresh every epoch (-1 = no caption in that slot).

    Coverage: the tuples are visited in cycles; each cycle is a fresh permutation cut into
    ``n_tuples // per_epoch`` epoch slices, so no tuple appears twice within an epoch and every tuple is
    seen about once per cycle. ``epoch_batches(epoch)`` returns a list of (n, S) slot arrays of caption
    indices, S = sum(quotas), slots in ``slot_langs`` order.
    """

    def __init__(
        self, caption_tuple, caption_lang, quotas: dict[str, int], batch_size: int, per_epoch: int, seed: int = 0
    ):
        if batch_size < 2:
            raise ValueError("batch_size must be >= 2: the ranking losses need in-batch negatives")
        if per_epoch < 0:
            raise ValueError(f"per_epoch must be >= 0, got {per_epoch}")
        self.slots = CaptionSlots(caption_tuple, caption_lang, quotas)
        self.quotas, self.slot_langs = self.slots.quotas, self.slots.slot_langs
        self.batch_size, self.per_epoch, self.seed = batch_size, per_epoch, seed
        self.tuples = self.slots.owners

    @property
    def tuples_per_epoch(self) -> int:
        return min(self.per_epoch, len(self.tuples))

    def epoch_tuples(self, epoch: int) -> np.ndarray:
        """Positions (into ``self.tuples``) of the tuples of this epoch, in batch order."""
        n, m = len(self.tuples), self.tuples_per_epoch
        if m == 0:
            return np.zeros(0, dtype=np.int64)
        slices = n // m  # epochs per cycle
        cycle, part = divmod(epoch, slices)
        order = np.random.default_rng([self.seed, cycle, _ORDER_STREAM]).permutation(n)
        return order[part * m : (part + 1) * m]

    def epoch_batches(self, epoch: int) -> list[np.ndarray]:
        chosen = self.epoch_tuples(epoch)
        rng = np.random.default_rng([self.seed, epoch, _CAPTION_STREAM])
        slots = self.slots.draw(rng, chosen)
        return [slots[s : s + self.batch_size] for s in range(0, len(chosen), self.batch_size) if len(chosen) - s >= 2]


def spread(n_items: int, n_slots: int) -> list[list[int]]:
    """Spread items 0..n_items-1 evenly over n_slots slots, in order: item j goes to slot
    floor(j * n_slots / n_items); with more items than slots some slots hold several."""
    out: list[list[int]] = [[] for _ in range(n_slots)]
    if n_slots:
        for j in range(n_items):
            out[j * n_slots // n_items].append(j)
    return out


class InterleavedTextTupleSampler:
    """Wraps a photo-tuple sampler: each image batch (photo_rows, slots) becomes
    (photo_rows, slots, [text slot arrays]) with the epoch's text-only batches spread evenly over the
    image batches (one training step = the image batch's loss + the text-text terms of its text batches)."""

    def __init__(self, image_sampler, text_sampler: TextTupleBatchSampler):
        self.image_sampler, self.text_sampler = image_sampler, text_sampler

    def epoch_batches(self, epoch: int) -> list[tuple[np.ndarray, np.ndarray, list[np.ndarray]]]:
        images = self.image_sampler.epoch_batches(epoch)
        texts = self.text_sampler.epoch_batches(epoch)
        return [
            (rows, slots, [texts[j] for j in js]) for (rows, slots), js in zip(images, spread(len(texts), len(images)))
        ]

    def __len__(self) -> int:
        return len(self.image_sampler)
