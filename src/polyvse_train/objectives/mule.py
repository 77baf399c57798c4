"""mule: batches of distinct photos with several captions per language (MULE's quotas); top-K
image-sentence hinge (lambda_3 = 1) + neighbourhood constraints on the universal and the sentence layer
(lambda_1 = nc_weight) + adversarial language classifier through gradient reversal (lambda_2 = lc_weight);
the first ``lp_epochs`` epochs are MULE's "LP" pretraining on caption pairs. Text-only tuples feed the
neighbourhood constraints (u only during LP)."""
from __future__ import annotations

import torch

from polyvse.losses import GroupedHingeLoss, LanguageAdversarialLoss, LanguageClassifier, NeighbourhoodConstraintLoss

from .tuples import TupleObjective


class MuleObjective(TupleObjective):
    name = "mule"

    def __init__(self, cfg, model, data, root=None, smoke: bool = False):
        super().__init__(cfg, model, data, root, smoke)
        self.matching = GroupedHingeLoss(cfg.objective.margin, **self.rank)
        self.neighbourhood = NeighbourhoodConstraintLoss(cfg.objective.nc_margin, top_k=self.rank["top_k"])
        if cfg.objective.lc_weight > 0:
            u_dim = model.config.universal_dim or model.config.pretrained_dim or model.config.word_dim
            self.language_loss = LanguageAdversarialLoss(LanguageClassifier(u_dim, len(cfg.data.languages)))
        lp_epochs = cfg.objective.lp_epochs
        self.lp_epochs = min(lp_epochs, 1) if smoke else lp_epochs  # a smoke run keeps one LP epoch

    @property
    def pre_epochs(self) -> int:
        return self.lp_epochs

    @classmethod
    def has_caption_caption_term(cls, cfg) -> bool:
        return cfg.objective.nc_weight > 0 or cfg.objective.lp_epochs > 0

    def has_text_term(self, epoch: int) -> bool:
        return epoch < self.lp_epochs or self.cfg.objective.nc_weight > 0

    def tuple_loss(self, photo_rows, encoded, epoch):
        cfg, model = self.cfg, self.model[0]
        caption_image, u = encoded.caption_image(), encoded.sentence_u()
        parts = {}
        if epoch < self.lp_epochs:  # LP: align the universal embedding on caption pairs before everything else
            loss = self.neighbourhood([u], caption_image)
            parts["lp"] = loss.item()
        else:
            loss = self.matching(model.scores(self.images(photo_rows), encoded.text), caption_image)
            parts["matching"] = loss.item()
            if cfg.objective.nc_weight > 0:
                nc = self.neighbourhood([u, encoded.text], caption_image)
                loss = loss + cfg.objective.nc_weight * nc
                parts["nc"] = nc.item()
            if cfg.objective.lc_weight > 0:
                index = {lang: i for i, lang in enumerate(cfg.data.languages)}
                lc = self.language_loss(u, torch.tensor([index[lang] for lang in encoded.langs]))
                loss = loss + cfg.objective.lc_weight * lc
                parts["lc"] = lc.item()
        if cfg.objective.word_l2 > 0:
            loss = loss + cfg.objective.word_l2 * model.text_encoder.embed.weight.pow(2).sum()
        return loss, parts

    def text_tuple_loss(self, encoded, epoch):
        labels, u = encoded.caption_image(), encoded.sentence_u()
        if epoch < self.lp_epochs:
            return self.neighbourhood([u], labels)
        return self.cfg.objective.nc_weight * self.neighbourhood([u, encoded.text], labels)
