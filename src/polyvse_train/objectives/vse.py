"""vse: batches of captions of distinct photos, languages mixed; bidirectional hinge over in-batch negatives
(sum, max violation or top-K). The demo; VSE, order embeddings, VSE++, AME. The one objective that runs
under DDP: each rank embeds its slice of the global batch and the embeddings are gathered with gradients."""
from __future__ import annotations

import numpy as np
import torch

from polyvse.errors import DataError
from polyvse.losses import HingeRankingLoss, InfoNceLoss
from polyvse.sampling import DistinctPhotoBatchSampler

from ..distributed import gather_with_grad, shard
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
    return model.scores(image_emb, text_emb)


class VseObjective(Objective):
    name = "vse"

    def __init__(self, cfg, model, data, root=None, smoke: bool = False):
        super().__init__(cfg, model, data, root, smoke)
        if cfg.sampler == "group_balanced":
            raise DataError("sampler group_balanced draws photos with their captions per language: use it with "
                            "objective pivot, parallel, mlmme or mule (objective vse samples captions)")
        if cfg.ranking_loss == "hinge":
            self.ranking = HingeRankingLoss(cfg.margin, **self.rank)
        elif cfg.ranking_loss == "infonce":
            if self.rank["top_k"] or self.rank["max_violation"]:
                raise DataError("ranking_loss infonce weighs every negative by its softmax: unset max_violation "
                                "and top_k")
            if not cfg.temperature > 0:
                raise DataError(f"temperature must be positive, got {cfg.temperature}")
            self.ranking = InfoNceLoss(cfg.temperature)
        else:
            raise DataError(f"ranking_loss {cfg.ranking_loss!r}: use hinge or infonce")

    def make_sampler(self, caption_photo):
        return DistinctPhotoBatchSampler(caption_photo, self.cfg.batch_size, seed=self.cfg.seed)

    def batch_sampler(self):
        return self.make_sampler(self.data.train.photo_row)

    def image_batch_loss(self, forward, batch, dist_info, epoch: int) -> tuple[torch.Tensor, dict]:
        return self.ranking(batch_scores(self.model[0], forward, self.data, batch, dist_info)), {}
