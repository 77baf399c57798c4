"""mlmme: beta * R_MM + (1 - beta) * R_ML (Calixto & Liu, Eq. 3) through ``polyvse.losses.MlmmeLoss``;
text-only tuples feed (1 - beta) * R_ML."""
from __future__ import annotations

from polyvse.losses import MlmmeLoss

from .tuples import OneCaptionPerLanguage


class MlmmeObjective(OneCaptionPerLanguage):
    name = "mlmme"

    def __init__(self, cfg, model, data, root=None, smoke: bool = False):
        super().__init__(cfg, model, data, root, smoke)
        self.loss = MlmmeLoss(cfg.objective.beta, cfg.objective.margin, similarity=model.similarity, **self.rank)

    @classmethod
    def has_caption_caption_term(cls, cfg) -> bool:
        return cfg.objective.beta < 1

    def tuple_loss(self, photo_rows, encoded, epoch):
        captions, masks = encoded.by_language(self.slot_langs)
        loss, parts = self.loss.forward_with_parts(self.images(photo_rows), captions, masks)
        return loss, {name: part.item() for name, part in parts.items()}

    def text_tuple_loss(self, encoded, epoch):
        return self.loss.caption_caption(*encoded.by_language(self.slot_langs, present_only=True))
