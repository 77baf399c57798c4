"""MULE's group-balanced sampling: when languages cover different photo sets, every batch draws its photos
from the photo groups in equal shares.

MULE (Kim et al. 2020, supplementary "Minibatch Construction"): COCO's photos fall into English-only,
English-Japanese and English-Chinese groups, "we sample images from each group equally", so the photos of the
small groups are drawn far more often than the English-only ones. Here a photo's group is the set of quota
languages it has captions in -- on COCO that gives MULE's groups (plus an en-ja-zh group for the few photos
that have all three, which MULE does not say where it puts); on F8K-ML, {en, zh} (Flickr8K photos outside
Multi30K) and {en, de, fr, cs, zh}.

Choices the paper leaves open:
  * Shares: each batch takes k = min(batch_size // G, smallest group) photos of each of the G groups; the
    batch_size % G places left over go one each to groups in rotation (only groups larger than k), so per
    batch the groups differ by at most one photo. Photos are distinct within a batch, so a group smaller than
    its share caps every share and batches shrink to about G x the smallest group.
  * Epoch: as many batches as the largest group needs to show each of its photos once
    (ceil(largest / k)). Every group is a stream of fresh permutations: every photo of every group is drawn at
    least once per epoch, the photos of smaller groups several times (each time with freshly drawn captions).
  * The epoch's batches depend only on (seed, epoch), as for the other samplers, so a resumed run is exact.
"""

from __future__ import annotations

import math

import numpy as np

from .photo_tuples import PhotoTupleBatchSampler

__all__ = ["GroupBalancedBatchSampler"]


class GroupBalancedBatchSampler(PhotoTupleBatchSampler):
    """Batches ``(photo_rows (n,), slots (n, S))`` like :class:`PhotoTupleBatchSampler`, with equal shares
    of the photo groups in every batch (module docstring)."""

    def __init__(
        self,
        caption_photo,
        caption_lang,
        quotas: dict[str, int],
        batch_size: int,
        seed: int = 0,
        drop_last: bool = False,
    ):
        super().__init__(caption_photo, caption_lang, quotas, batch_size, seed=seed, drop_last=drop_last)
        langs = list(self.quotas)
        by_group: dict[tuple[str, ...], list[int]] = {}
        for i, caps in enumerate(self.slots.captions):  # i: index into self.photos
            key = tuple(lang for lang in langs if caps.get(lang))
            by_group.setdefault(key, []).append(i)
        #: group label ("en+zh") -> indices into ``self.photos``, groups in order of their language sets
        self.groups = {"+".join(k): np.array(v, dtype=np.int64) for k, v in sorted(by_group.items())}
        sizes = [len(v) for v in self.groups.values()]
        if not sizes:
            raise ValueError("no photo has a caption in the quota languages")
        if batch_size < len(sizes):
            raise ValueError(
                f"batch_size {batch_size} is smaller than the number of photo groups "
                f"({', '.join(self.groups)}): each batch needs a photo of every group"
            )
        self.share = min(batch_size // len(sizes), min(sizes))
        self.extra = batch_size - self.share * len(sizes) if self.share == batch_size // len(sizes) else 0
        self.n_batches = max(math.ceil(s / self.share) for s in sizes)

    def group_sizes(self) -> dict[str, int]:
        return {g: len(v) for g, v in self.groups.items()}

    def epoch_batches(self, epoch: int) -> list[tuple[np.ndarray, np.ndarray]]:
        rng = np.random.default_rng([self.seed, epoch])
        members = list(self.groups.values())
        streams = [list(rng.permutation(m)) for m in members]
        can_take_extra = [g for g, m in enumerate(members) if len(m) > self.share]
        batches = []
        for b in range(self.n_batches):
            extra = set()
            if self.extra and can_take_extra:
                start = b * self.extra
                extra = {
                    can_take_extra[(start + j) % len(can_take_extra)]
                    for j in range(min(self.extra, len(can_take_extra)))
                }
            picked: list[int] = []
            for g, m in enumerate(members):
                need = self.share + (g in extra)
                taken = streams[g][:need]
                streams[g] = streams[g][need:]
                if len(taken) < need:  # the group's permutation ran out: a fresh one, no repeat in this batch
                    fresh = [int(x) for x in rng.permutation(m)]
                    seen = set(taken)
                    add = [x for x in fresh if x not in seen][: need - len(taken)]
                    added = set(add)
                    streams[g] = [x for x in fresh if x not in added]
                    taken = taken + add
                picked += [int(x) for x in taken]
            idx = np.array(picked, dtype=np.int64)[rng.permutation(len(picked))]
            if len(idx) < 2:
                continue
            batches.append((self.photos[idx], self.draw_slots(rng, idx)))
        return batches

    def __len__(self) -> int:
        return self.n_batches
