"""vse: batches of captions of distinct photos, languages mixed; bidirectional hinge over in-batch negatives
(sum, max violation or top-K). The demo; VSE, order embeddings, VSE++, AME. The one objective that runs
under DDP: each rank embeds its slice of the global batch and the embeddings are gathered with gradients."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from polyvse.device import autocast_off
from polyvse.losses import HingeRankingLoss, InfoNceLoss

from ..distributed import gather_with_grad, shard
from ..sampling import DistinctPhotoBatchSampler, DrawnCaptionsSampler
from ..sections import at_least, one_of
from ..teacher import TeacherLoss
from .base import Objective, ObjectiveOptions

RANKING_LOSSES = ("hinge", "infonce")


@dataclass
class VseOptions(ObjectiveOptions):
    """The ranking loss, and teacher learning (``polyvse_train.teacher``, Multilingual-CLIP): each step also pulls
    the embeddings of a batch of Multi30K task1 lines in ``teacher_students`` onto the model's own (detached)
    embedding of the same photo's ``teacher_language`` line, InfoNCE at ``temperature``; the lines come from the
    dataset's text-only corpus."""

    # hinge (the section's margin, max_violation, top_k) | infonce (symmetric softmax cross-entropy over the
    # batch at `temperature`, as CLIP)
    ranking_loss: str = "hinge"
    temperature: float = 0.05
    hard_negative_beta: float = 0.0  # infonce only: HN-NCE's weighting of the closer negatives (0 = plain InfoNCE)
    teacher_students: list[str] = field(default_factory=list)  # [] = off
    teacher_language: str = "en"
    teacher_weight: float = 1.0
    teacher_batch_size: int = 256
    teacher_photos: str = "all"  # all: every Multi30K photo outside evaluation | train: the run's training photos
    # > 0: each epoch trains on this many captions of each photo and language, drawn anew every epoch from all
    # it has (data.captions_per_photo: 0 keeps them all): an epoch's cost of k captions a photo, every caption
    # seen over the epochs; 0: every training caption every epoch
    draw_captions: int = 0

    def check(self, fail) -> None:
        at_least(fail, self, "draw_captions", 0)
        if self.ranking_loss not in RANKING_LOSSES:
            fail("ranking_loss", f"{self.ranking_loss!r}: use hinge or infonce")
        if not self.temperature > 0:
            fail("temperature", f"must be positive, got {self.temperature}")
        if not self.hard_negative_beta >= 0:
            fail("hard_negative_beta", f"must be 0 (plain InfoNCE) or positive, got {self.hard_negative_beta}")
        if self.hard_negative_beta and self.ranking_loss != "infonce":
            fail(
                "hard_negative_beta",
                "weighs InfoNCE's negatives: set ranking_loss: infonce (the hinge's hard "
                "negatives are objective.max_violation / top_k)",
            )
        if not self.teacher_students:
            return
        if self.teacher_language in self.teacher_students:
            fail("teacher_students", f"{self.teacher_language} is the teacher_language; a language cannot teach itself")
        at_least(fail, self, "teacher_batch_size", 2)
        one_of(fail, self, "teacher_photos", ("all", "train"))
        if not self.teacher_weight > 0:
            fail("teacher_weight", f"must be positive, got {self.teacher_weight}")

    def check_config(self, cfg, fail) -> None:
        if self.ranking_loss == "infonce" and (cfg.objective.max_violation or cfg.objective.top_k):
            fail(
                "ranking_loss",
                "infonce weighs every negative by its softmax: unset objective.max_violation and objective.top_k",
            )


def batch_scores(model, forward, data, idx, dist_info) -> torch.Tensor:
    """Score matrix of a global batch of captions. Each rank embeds its slice; embeddings are gathered with
    gradients."""
    local = local_captions(idx, dist_info)
    ids, lengths = data.captions.pad([data.train.ids[i] for i in local])
    langs = [data.train.langs[i] for i in local] if model.needs_language else None
    if langs is None:
        image_emb, text_emb = forward(data.features[data.train.photo_row[local]], ids, lengths)
    else:
        image_emb, text_emb = forward(data.features[data.train.photo_row[local]], ids, lengths, langs)
    if dist_info.enabled:
        sizes = [len(s) for s in np.array_split(np.asarray(idx), dist_info.world_size)]
        image_emb = gather_with_grad(image_emb, dist_info, sizes)
        text_emb = gather_with_grad(text_emb, dist_info, sizes)
    return fp32_scores(model, image_emb, text_emb)


def local_captions(idx, dist_info) -> np.ndarray:
    """The captions of a global batch this rank embeds (all of them in one process)."""
    return shard(idx, dist_info) if dist_info.enabled else np.asarray(idx)


def fp32_scores(model, image_emb, text_emb) -> torch.Tensor:
    with autocast_off(image_emb.device):  # the scores (InfoNCE's logits x t) in fp32 under bf16 autocast
        return model.scores(image_emb.float(), text_emb.float())


class VseObjective(Objective):
    name = "vse"
    Options = VseOptions

    def __init__(self, cfg, model, data, root=None):
        super().__init__(cfg, model, data, root)
        opts = self.options
        self.ranking = (
            HingeRankingLoss(cfg.objective.margin, **self.rank)
            if opts.ranking_loss == "hinge"
            else InfoNceLoss(opts.temperature, opts.hard_negative_beta)
        )
        self.teacher = (
            None
            if getattr(data, "teacher", None) is None
            else TeacherLoss(
                data.teacher, opts.teacher_batch_size, opts.temperature, cfg.schedule.seed, opts.teacher_language
            )
        )

    def make_sampler(self, caption_photo):
        return DistinctPhotoBatchSampler(caption_photo, self.cfg.schedule.batch_size, seed=self.cfg.schedule.seed)

    def batch_sampler(self):
        train = self.data.train
        if not self.options.draw_captions:
            return self.make_sampler(train.photo_row)
        _, lang = np.unique(np.asarray(train.langs), return_inverse=True)
        group = np.asarray(train.photo_row, dtype=np.int64) * (int(lang.max()) + 1) + lang  # (photo, language)
        return DrawnCaptionsSampler(
            train.photo_row, group, self.options.draw_captions, self.make_sampler, seed=self.cfg.schedule.seed
        )

    def photo_rows(self, batch, dist_info) -> np.ndarray:
        return self.data.train.photo_row[local_captions(batch, dist_info)]

    def image_batch_loss(self, forward, batch, dist_info, epoch: int) -> tuple[torch.Tensor, dict]:
        if self.teacher is not None and dist_info.enabled:
            loss, taught = self.distributed_teacher_losses(forward, batch, dist_info, epoch)
        else:
            loss = self.ranking(batch_scores(self.model[0], forward, self.data, batch, dist_info))
            if self.teacher is None:
                return loss, {}
            taught = self.teacher(self.model[0], self.data.captions, epoch, batch)
        return loss + self.options.teacher_weight * taught, {"teacher": taught.detach()}  # read never per step

    def distributed_teacher_losses(self, forward, batch, dist_info, epoch: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(ranking loss, teacher loss) under DDP. One pass through the DDP wrapper embeds this rank's captions and
        its slice of the step's teacher pairs: outside it, DDP (find_unused_parameters) would take a language part
        that only the teacher term used for unused, and its gradient would then fail the reducer; and every rank
        would embed every pair. Both are gathered with gradients, as the captions are (``batch_scores``)."""
        model, data, teacher = self.model[0], self.data, self.teacher
        local, rows = shard(batch, dist_info), teacher.rows(epoch, batch)
        mine = shard(rows, dist_info)
        pairs, n, m = teacher.pairs, len(local), len(mine)
        ids, lengths = data.captions.pad(
            [data.train.ids[i] for i in local] + [pairs.student[i] for i in mine] + [pairs.teacher[i] for i in mine]
        )
        langs = (
            ([data.train.langs[i] for i in local] + [pairs.langs[i] for i in mine] + [teacher.teacher_language] * m)
            if model.needs_language
            else None
        )
        image_emb, text_emb = forward(data.features[data.train.photo_row[local]], ids, lengths, langs)
        sizes = [len(s) for s in np.array_split(np.asarray(batch), dist_info.world_size)]
        pair_sizes = [len(s) for s in np.array_split(rows, dist_info.world_size)]
        image_emb, caption_emb = (gather_with_grad(x, dist_info, sizes) for x in (image_emb, text_emb[:n]))
        student, taught_by = (
            gather_with_grad(x, dist_info, pair_sizes) for x in (text_emb[n : n + m], text_emb[n + m :].detach())
        )
        return self.ranking(fp32_scores(model, image_emb, caption_emb)), teacher.loss_of(student, taught_by)
