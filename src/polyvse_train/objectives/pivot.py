"""pivot: batches of distinct photos with one caption per language (Gella et al. PIVOT, Eq. 1)."""

from __future__ import annotations

from polyvse.losses import PivotLoss

from .tuples import OneCaptionPerLanguage


class PivotObjective(OneCaptionPerLanguage):
    name = "pivot"

    def __init__(self, cfg, model, data, root=None):
        super().__init__(cfg, model, data, root)
        self.loss = PivotLoss(model.similarity, cfg.objective.margin, **self.rank)

    def tuple_loss(self, photo_rows, encoded, epoch):
        captions, masks = encoded.by_language(self.slot_langs)
        return self.loss(self.images(photo_rows), captions, masks), {}
