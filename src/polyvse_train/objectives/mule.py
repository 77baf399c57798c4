"""mule: batches of distinct photos with several captions per language (MULE's quotas); top-K
image-sentence hinge (lambda_3 = 1) + neighbourhood constraints on the universal and the sentence layer
(lambda_1 = nc_weight) + adversarial language classifier through gradient reversal (lambda_2 = lc_weight);
the first ``lp_epochs`` epochs are MULE's "LP" pretraining on caption pairs. Text-only tuples feed the
neighbourhood constraints (u only during LP)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from polyvse.losses import GroupedHingeLoss, LanguageAdversarialLoss, LanguageClassifier, NeighbourhoodConstraintLoss

from ..sections import at_least
from .tuples import TupleObjective, TupleOptions


@dataclass
class MuleOptions(TupleOptions):
    """MULE's terms: weights lambda_1 (neighbourhood constraints) and lambda_2 (language classifier, through a
    gradient-reversal layer); lambda_3 = 1 (image-sentence matching)."""

    nc_weight: float = 0.0
    nc_margin: float = 0.05
    lc_weight: float = 0.0
    lp_epochs: int = 0  # MULE "LP": epochs of neighbourhood constraints on caption pairs before the rest
    word_l2: float = 0.0  # L2 penalty on the word embeddings of the batch (MULE: 5e-7)

    def check(self, fail) -> None:
        super().check(fail)
        for name in ("nc_weight", "lc_weight", "lp_epochs", "word_l2"):
            at_least(fail, self, name, 0)


class MuleObjective(TupleObjective):
    name = "mule"
    Options = MuleOptions

    def __init__(self, cfg, model, data, root=None):
        super().__init__(cfg, model, data, root)
        opts = self.options
        self.matching = GroupedHingeLoss(cfg.objective.margin, **self.rank)
        self.neighbourhood = NeighbourhoodConstraintLoss(opts.nc_margin, top_k=self.rank["top_k"])
        if opts.lc_weight > 0:
            u_dim = model.config.universal_dim or model.config.pretrained_dim or model.config.word_dim
            self.language_loss = LanguageAdversarialLoss(LanguageClassifier(u_dim, len(cfg.data.languages)))
        self.lp_epochs = opts.lp_epochs  # a smoke run keeps one (SmokeSection.caps)

    @property
    def pre_epochs(self) -> int:
        return self.lp_epochs

    @classmethod
    def has_caption_caption_term(cls, cfg) -> bool:
        return cfg.objective.options.nc_weight > 0 or cfg.objective.options.lp_epochs > 0

    def has_text_term(self, epoch: int) -> bool:
        return epoch < self.lp_epochs or self.options.nc_weight > 0

    def tuple_loss(self, photo_rows, encoded, epoch):
        cfg, opts, model = self.cfg, self.options, self.model[0]
        caption_image, u = encoded.caption_image(), encoded.sentence_u()
        parts = {}
        if epoch < self.lp_epochs:  # LP: align the universal embedding on caption pairs before everything else
            loss = self.neighbourhood([u], caption_image)
            parts["lp"] = loss.detach()
        else:
            loss = self.matching(model.scores(self.images(photo_rows), encoded.text), caption_image)
            parts["matching"] = loss.detach()
            if opts.nc_weight > 0:
                nc = self.neighbourhood([u, encoded.text], caption_image)
                loss = loss + opts.nc_weight * nc
                parts["nc"] = nc.detach()
            if opts.lc_weight > 0:
                index = {lang: i for i, lang in enumerate(cfg.data.languages)}
                lc = self.language_loss(u, torch.tensor([index[lang] for lang in encoded.langs]))
                loss = loss + opts.lc_weight * lc
                parts["lc"] = lc.detach()
        if opts.word_l2 > 0:
            loss = loss + opts.word_l2 * model.text_encoder.embed.weight.pow(2).sum()
        return loss, parts

    def text_tuple_loss(self, encoded, epoch):
        labels, u = encoded.caption_image(), encoded.sentence_u()
        if epoch < self.lp_epochs:
            return self.neighbourhood([u], labels)
        return self.options.nc_weight * self.neighbourhood([u, encoded.text], labels)
