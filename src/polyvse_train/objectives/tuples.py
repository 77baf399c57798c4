"""What the tuple objectives (pivot, parallel, mlmme, mule) share: batches of distinct photos with their
captions per language, the captions of a slot array encoded once, and the same code for text-only tuples."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from polyvse.errors import DataError
from polyvse.losses.adversarial import masked_mean
from polyvse.modules.text_input import CaptionEncoder

from ..sampling import (
    GroupBalancedBatchSampler,
    InterleavedTextTupleSampler,
    PhotoTupleBatchSampler,
    TextTupleBatchSampler,
    slot_languages,
)
from ..sections import one_of
from .base import Objective, ObjectiveOptions

SAMPLERS = ("distinct", "group_balanced")


@dataclass
class TupleOptions(ObjectiveOptions):
    """What the tuple objectives' batches hold: how many captions of each language come with a photo, and how
    photos are drawn (pivot and parallel have no other option)."""

    quotas: dict[str, int] = field(default_factory=dict)  # captions per photo per language; {} = 1 each
    # distinct (each photo once per epoch, shuffled) | group_balanced (MULE: photos grouped by the languages they
    # have, every batch draws equally from each group; small groups repeat)
    sampler: str = "distinct"

    def check(self, fail) -> None:
        one_of(fail, self, "sampler", SAMPLERS)

    def check_config(self, cfg, fail) -> None:
        unknown = sorted(set(self.quotas) - set(cfg.data.languages))
        if unknown:
            fail("quotas", f"languages {unknown} are not in data.languages {cfg.data.languages}")


@dataclass
class EncodedSlots:
    """The captions of an (n, S) slot array (-1 = empty slot), encoded row-major: photo by photo, slot by slot."""

    valid: np.ndarray  # (n, S) bool
    text: torch.Tensor  # (n_captions, d) sentence embeddings
    words: torch.Tensor  # (n_captions, T, d_w) word features
    lengths: torch.Tensor
    langs: list[str]

    def caption_image(self) -> torch.Tensor:
        """The photo (row of the slot array) of every caption."""
        return torch.as_tensor(np.nonzero(self.valid)[0], dtype=torch.long)

    def sentence_u(self) -> torch.Tensor:
        """MULE's sentence u_i: the mean of its word features in the universal embedding."""
        return masked_mean(self.words, torch.arange(self.words.shape[1])[None, :] < self.lengths[:, None])

    def by_language(self, slot_langs: list[str], present_only: bool = False):
        """({lang: (n, d) captions}, {lang: (n,) mask}) with one caption per slot; empty slots are zeros.
        ``present_only`` drops slots no row fills (a language a text corpus lacks, e.g. zh)."""
        n, s = self.valid.shape
        where = torch.as_tensor(np.flatnonzero(self.valid.reshape(-1)), device=self.text.device)
        full = self.text.new_zeros((n * s, self.text.shape[1])).index_copy(0, where, self.text).view(n, s, -1)
        cols = [j for j in range(s) if not present_only or self.valid[:, j].any()]
        return (
            {slot_langs[j]: full[:, j] for j in cols},
            {slot_langs[j]: torch.as_tensor(self.valid[:, j]) for j in cols},
        )


def encode_slots(model, slots: np.ndarray, ids_of, langs_of, pad) -> EncodedSlots:
    valid = slots >= 0
    flat = slots[valid]
    ids, lengths = pad([ids_of(c) for c in flat])
    langs = [langs_of[c] for c in flat]
    text, words = model.text_features(ids, lengths, langs)
    return EncodedSlots(valid, text, words, lengths, langs)


class TupleObjective(Objective):
    """Batches ``(photo_rows, slots)`` of distinct photos with ``quotas[lang]`` captions per language.
    Subclasses implement ``tuple_loss`` and, if they have a caption-caption term, ``text_tuple_loss``."""

    Options = TupleOptions

    def __init__(self, cfg, model, data, root=None):
        super().__init__(cfg, model, data, root)
        #: captions per photo per language (image batches and text-only tuples); {} = 1 each
        self.quotas = self.options.quotas or {lang: 1 for lang in cfg.data.languages}
        self.slot_langs = slot_languages(self.quotas)

    def sampler(self):
        """The image batches, with the text-only tuple batches of ``data.text_corpus`` riding along."""
        sampler = super().sampler()
        text = getattr(self.data, "text_tuples", None)
        if text is not None:
            cfg = self.cfg
            sampler = InterleavedTextTupleSampler(
                sampler,
                TextTupleBatchSampler(
                    text.tuple_index,
                    text.langs,
                    self.quotas,
                    cfg.schedule.batch_size,
                    cfg.data.text_tuples_per_epoch,
                    seed=cfg.schedule.seed,
                ),
            )
        return sampler

    def batch_sampler(self):
        cfg, train = self.cfg, self.data.train
        if self.options.sampler == "group_balanced":  # MULE: equal shares of the photo groups in every batch
            return GroupBalancedBatchSampler(
                train.photo_row, train.langs, self.quotas, cfg.schedule.batch_size, seed=cfg.schedule.seed
            )
        return PhotoTupleBatchSampler(
            train.photo_row, train.langs, self.quotas, cfg.schedule.batch_size, seed=cfg.schedule.seed
        )

    def image_batch_loss(self, forward, batch, dist_info, epoch: int) -> tuple[torch.Tensor, dict]:
        if dist_info.enabled:
            raise DataError(f"objective {self.name!r} runs in one process; DDP is supported for objective vse")
        train = self.data.train
        encoded = encode_slots(self.model[0], batch[1], train.ids.__getitem__, train.langs, self.data.captions.pad)
        return self.tuple_loss(batch[0], encoded, epoch)

    def tuple_loss(self, photo_rows, encoded: EncodedSlots, epoch: int) -> tuple[torch.Tensor, dict]:
        raise NotImplementedError

    def photo_rows(self, batch, dist_info) -> np.ndarray:
        return np.asarray(batch[0])

    def images(self, photo_rows) -> torch.Tensor:
        return self.model[0].encode_image_features(self.data.features[photo_rows])

    def text_batch_loss(self, text_batches, epoch: int) -> torch.Tensor | None:
        if not self.has_text_term(epoch):
            return None
        text = self.data.text_tuples
        terms = []
        for slots in text_batches:
            if int((slots >= 0).sum()) < 2:
                continue
            terms.append(
                self.text_tuple_loss(
                    encode_slots(self.model[0], slots, text.ids, text.langs, CaptionEncoder.pad), epoch
                )
            )
        return torch.stack(terms).sum() if terms else None

    def has_text_term(self, epoch: int) -> bool:
        """Whether text-only tuples have a term in this epoch (only the text branch: they have no image)."""
        return self.has_caption_caption_term(self.cfg)

    def text_tuple_loss(self, encoded: EncodedSlots, epoch: int) -> torch.Tensor:
        raise NotImplementedError


class OneCaptionPerLanguage(TupleObjective):
    """PIVOT, PARALLEL and MLMME pair one caption per language with each photo."""

    def __init__(self, cfg, model, data, root=None):
        super().__init__(cfg, model, data, root)
        if any(q != 1 for q in self.quotas.values()):
            raise DataError(
                f"objective {self.name} pairs one caption per language with each photo; "
                f"quotas must all be 1, got {self.quotas}"
            )
