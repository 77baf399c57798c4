"""parallel: PIVOT + the caption-caption term between every pair of languages (Gella et al. PARALLEL, Eq. 2);
text-only tuples feed the caption-caption term."""

from __future__ import annotations

from polyvse.losses import ParallelLoss, PivotLoss

from .tuples import OneCaptionPerLanguage


class ParallelObjective(OneCaptionPerLanguage):
    name = "parallel"

    def __init__(self, cfg, model, data, root=None):
        super().__init__(cfg, model, data, root)
        self.pivot = PivotLoss(model.similarity, cfg.objective.margin, **self.rank)
        self.parallel = ParallelLoss(model.similarity, cfg.objective.margin, **self.rank)

    @classmethod
    def has_caption_caption_term(cls, cfg) -> bool:
        return True

    def tuple_loss(self, photo_rows, encoded, epoch):
        captions, masks = encoded.by_language(self.slot_langs)
        images = self.images(photo_rows)
        pivot, para = self.pivot(images, captions, masks), self.parallel(images, captions, masks)
        return pivot + para, {"pivot": pivot.detach(), "parallel": para.detach()}

    def text_tuple_loss(self, encoded, epoch):
        return self.parallel(None, *encoded.by_language(self.slot_langs, present_only=True))
