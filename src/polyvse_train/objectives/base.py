"""The interface every training objective implements, and what they share.

An objective turns a batch of its sampler into a loss:

    sampler()                           the batches of an epoch (``polyvse_train.sampling``), wrapped here for
                                        ``min_batches_per_epoch`` and for text-only tuples (``text_corpus``)
    image_batch_loss(forward, batch, dist_info, epoch) -> (loss, {part: float})
    photo_rows(batch, dist_info) -> rows    the photos whose images that batch reads (the pixel path's to decode)
    text_batch_loss(text_batches, epoch) -> loss | None     optional: the caption-caption terms of text-only
                                        tuple batches (objectives with such a term override it)

``forward`` (``objective(forward, batch, dist_info, epoch)``) adds the two and applies the hard-negative
warm-up. An objective also owns the parameters that are not part of the retrieval model (MULE's language
classifier, in its state_dict) and hooks that run around the loop (``start_epoch``, ``after_step``,
``epoch_log``). Photos lacking a language keep their place in tuple batches; the losses mask their empty slots.

An objective declares its own options: ``Options``, a dataclass of its settings that checks them
(:class:`ObjectiveOptions`). A config names the objective and sets them in the objective's own block
(``objective: {name: mule, margin: 0.05, mule: {nc_weight: 1.0}}``); the objective reads them as
``self.options``. The section's own fields (the margin and the negatives of the ranking losses) are shared by all.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch
from torch import nn

from polyvse.errors import DataError
from polyvse.losses import every_negative

from ..sampling import RepeatedPassSampler, StagedSampler
from ..sections import Section


@dataclass
class ObjectiveOptions(Section):
    """An objective's own options: a dataclass of typed fields (each with a flat name of its own, unique across the
    config) that checks its values in ``check`` and what they need of the rest of the config in ``check_config``.
    An objective without options keeps this one, which has no field."""

    def check_config(self, cfg, fail) -> None:
        """Call ``fail(field, message)`` for a value the rest of ``cfg`` rules out (a language it does not train)."""


class Objective(nn.Module):
    """Base class of the objectives (module docstring). Subclasses set ``name`` (and ``Options`` when they have
    options) and implement ``batch_sampler`` and ``image_batch_loss``."""

    name: ClassVar[str] = ""
    Options: ClassVar[type[ObjectiveOptions]] = ObjectiveOptions

    def __init__(self, cfg, model, data, root: Path | None = None):
        super().__init__()
        self.cfg = cfg
        self.options = cfg.objective.options  # this objective's own options (an instance of ``Options``)
        self.model = [model]  # a list: the model is not a submodule (its weights live in the checkpoint)
        self.data = data
        top_k = cfg.objective.top_k or None
        #: the negatives of every ranking loss: all, the hardest (max violation) or the K hardest
        self.rank = dict(max_violation=cfg.objective.max_violation and top_k is None, top_k=top_k)
        self.root = root

    # -- the interface -------------------------------------------------------------------------------
    def batch_sampler(self):
        """The sampler of the image batches."""
        raise NotImplementedError

    def image_batch_loss(self, forward, batch, dist_info, epoch: int) -> tuple[torch.Tensor, dict]:
        raise NotImplementedError

    def photo_rows(self, batch, dist_info) -> np.ndarray:
        """The photo rows (of ``data.features``) whose images this rank's part of ``batch`` reads: what the pixel
        path decodes ahead of the step (polyvse_train.pixels)."""
        raise NotImplementedError

    def text_batch_loss(self, text_batches, epoch: int) -> torch.Tensor | None:
        """The caption-caption terms on text-only tuple batches, or None when there is none this epoch."""
        raise DataError(f"objective {self.name!r} has no caption-caption term for text_corpus; set text_corpus: none")

    @classmethod
    def has_caption_caption_term(cls, cfg) -> bool:
        """Whether ``cfg`` gives this objective a term that text-only tuples can feed."""
        return False

    @property
    def pre_epochs(self) -> int:
        """Epochs before the main schedule (its lr decay counts from here): MULE's LP, the Translator's source."""
        return 0

    # -- shared machinery ----------------------------------------------------------------------------
    def sampler(self):
        """The batches of an epoch: ``batch_sampler``'s, repeated up to ``min_batches_per_epoch``."""
        sampler = self.batch_sampler()
        min_batches = self.cfg.schedule.min_batches_per_epoch
        if min_batches > 0:
            sampler = (
                StagedSampler(
                    RepeatedPassSampler(sampler.first, min_batches),
                    RepeatedPassSampler(sampler.second, min_batches),
                    sampler.switch_epoch,
                )
                if isinstance(sampler, StagedSampler)
                else RepeatedPassSampler(sampler, min_batches)
            )
        return sampler

    def forward(self, forward, batch, dist_info, epoch: int) -> tuple[torch.Tensor, dict]:
        with every_negative(self) if self.warming_up(epoch) else nullcontext():
            loss, parts = self.image_batch_loss(forward, batch, dist_info, epoch)
            if isinstance(batch, tuple) and len(batch) == 3 and batch[2]:  # + text-only tuples (cfg.data.text_corpus)
                text = self.text_batch_loss(batch[2], epoch)
                if text is not None:
                    loss = loss + text
                    parts["text_tuples"] = text.detach()
        return loss, parts

    def warming_up(self, epoch: int) -> bool:
        """True in the first ``hard_negative_warmup_epochs`` epochs of the main schedule."""
        return 0 <= epoch - self.pre_epochs < self.cfg.objective.hard_negative_warmup_epochs

    # -- hooks ---------------------------------------------------------------------------------------
    def start_epoch(self, epoch: int) -> None:
        pass

    def after_step(self, step: int) -> None:
        pass

    def epoch_log(self) -> dict:
        return {}
