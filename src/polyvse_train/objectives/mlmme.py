"""mlmme: beta * R_MM + (1 - beta) * R_ML (Calixto & Liu, Eq. 3) through ``polyvse.losses.MlmmeLoss``;
text-only tuples feed (1 - beta) * R_ML."""

from __future__ import annotations

from dataclasses import dataclass

from polyvse.losses import MlmmeLoss

from .tuples import OneCaptionPerLanguage, TupleOptions


@dataclass
class MlmmeOptions(TupleOptions):
    beta: float = 1.0  # beta * R_MM (image-sentence) + (1 - beta) * R_ML (sentence-sentence)

    def check(self, fail) -> None:
        super().check(fail)
        if not 0 <= self.beta <= 1:
            fail("beta", f"{self.beta}: the weight of R_MM, in [0, 1]")


class MlmmeObjective(OneCaptionPerLanguage):
    name = "mlmme"
    Options = MlmmeOptions

    def __init__(self, cfg, model, data, root=None):
        super().__init__(cfg, model, data, root)
        self.loss = MlmmeLoss(self.options.beta, cfg.objective.margin, similarity=model.similarity, **self.rank)

    @classmethod
    def has_caption_caption_term(cls, cfg) -> bool:
        return cfg.objective.options.beta < 1

    def tuple_loss(self, photo_rows, encoded, epoch):
        captions, masks = encoded.by_language(self.slot_langs)
        loss, parts = self.loss.forward_with_parts(self.images(photo_rows), captions, masks)
        return loss, {name: part.detach() for name, part in parts.items()}

    def text_tuple_loss(self, encoded, epoch):
        return self.loss.caption_caption(*encoded.by_language(self.slot_langs, present_only=True))
