"""vse: batches of captions of distinct photos, languages mixed; bidirectional hinge over in-batch negatives
(sum, max violation or top-K). The demo; VSE, order embeddings, VSE++, AME. The one objective that runs
under DDP: each rank embeds its slice of the global batch and the embeddings are gathered with gradients."""
from __future__ import annotations

import numpy as np
import torch

from polyvse.device import autocast_off
from polyvse.errors import DataError
from polyvse.losses import HingeRankingLoss, InfoNceLoss
from polyvse.sampling import DistinctPhotoBatchSampler

from ..distributed import gather_with_grad, shard
from ..teacher import TeacherLoss
from .base import Objective


def batch_scores(model, forward, data, idx, dist_info) -> torch.Tensor:
    """Score matrix of a global batch of captions. Each rank embeds its slice; embeddings are gathered with
    gradients."""
    local = shard(idx, dist_info) if dist_info.enabled else np.asarray(idx)
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


def fp32_scores(model, image_emb, text_emb) -> torch.Tensor:
    with autocast_off(image_emb.device):  # the scores (InfoNCE's logits x t) in fp32 under bf16 autocast
        return model.scores(image_emb.float(), text_emb.float())


class VseObjective(Objective):
    name = "vse"

    def __init__(self, cfg, model, data, root=None, smoke: bool = False):
        super().__init__(cfg, model, data, root, smoke)
        if cfg.objective.sampler == "group_balanced":
            raise DataError("sampler group_balanced draws photos with their captions per language: use it with "
                            "objective pivot, parallel, mlmme or mule (objective vse samples captions)")
        obj = cfg.objective  # ranking_loss and temperature are checked by config.ObjectiveSection
        self.ranking = (HingeRankingLoss(obj.margin, **self.rank) if obj.ranking_loss == "hinge"
                        else InfoNceLoss(obj.temperature))
        self.teacher = None if getattr(data, "teacher", None) is None else TeacherLoss(
            data.teacher, obj.teacher_batch_size, obj.temperature, cfg.schedule.seed, obj.teacher_language)

    def make_sampler(self, caption_photo):
        return DistinctPhotoBatchSampler(caption_photo, self.cfg.schedule.batch_size, seed=self.cfg.schedule.seed)

    def batch_sampler(self):
        return self.make_sampler(self.data.train.photo_row)

    def image_batch_loss(self, forward, batch, dist_info, epoch: int) -> tuple[torch.Tensor, dict]:
        if self.teacher is not None and dist_info.enabled:
            loss, taught = self.distributed_teacher_losses(forward, batch, dist_info, epoch)
        else:
            loss = self.ranking(batch_scores(self.model[0], forward, self.data, batch, dist_info))
            if self.teacher is None:
                return loss, {}
            taught = self.teacher(self.model[0], self.data.captions, epoch, batch)
        return loss + self.cfg.objective.teacher_weight * taught, {"teacher": taught.detach()}  # read never per step

    def distributed_teacher_losses(self, forward, batch, dist_info, epoch: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(ranking loss, teacher loss) under DDP. One pass through the DDP wrapper embeds this rank's captions and
        its slice of the step's teacher pairs: outside it, DDP (find_unused_parameters) would take a language part
        that only the teacher term used for unused, and its gradient would then fail the reducer; and every rank
        would embed every pair. Both are gathered with gradients, as the captions are (``batch_scores``)."""
        model, data, teacher = self.model[0], self.data, self.teacher
        local, rows = shard(batch, dist_info), teacher.rows(epoch, batch)
        mine = shard(rows, dist_info)
        pairs, n, m = teacher.pairs, len(local), len(mine)
        ids, lengths = data.captions.pad([data.train.ids[i] for i in local] + [pairs.student[i] for i in mine]
                                         + [pairs.teacher[i] for i in mine])
        langs = ([data.train.langs[i] for i in local] + [pairs.langs[i] for i in mine]
                 + [teacher.teacher_language] * m) if model.needs_language else None
        image_emb, text_emb = forward(data.features[data.train.photo_row[local]], ids, lengths, langs)
        sizes = [len(s) for s in np.array_split(np.asarray(batch), dist_info.world_size)]
        pair_sizes = [len(s) for s in np.array_split(rows, dist_info.world_size)]
        image_emb, caption_emb = (gather_with_grad(x, dist_info, sizes) for x in (image_emb, text_emb[:n]))
        student, taught_by = (gather_with_grad(x, dist_info, pair_sizes)
                              for x in (text_emb[n: n + m], text_emb[n + m:].detach()))
        return self.ranking(fp32_scores(model, image_emb, caption_emb)), teacher.loss_of(student, taught_by)
