"""The ``align:`` section in a run: AME's aligner (polyvse.alignment.LexiconAligner) built from the config and
composed into the run beside its objective, whatever the objective (the training loop steps it every
``align.every`` iterations and logs its alignment ratio); docs/methods/ame.md."""

from __future__ import annotations

import logging
from pathlib import Path

from polyvse.alignment import LexiconAligner
from polyvse.errors import DataError

log = logging.getLogger("polyvse.train")


class WordAlignment:
    """The run's aligner with its schedule: a step every ``align.every`` iterations when ``align.loss`` is on (a
    smoke run, a dozen steps, aligns every 2: SmokeSection.caps), the alignment ratio in every epoch's log. Its parameters (the
    translators W_l) are the aligner's own, trained by its own optimiser."""

    def __init__(self, aligner: LexiconAligner, loss: bool, every: int):
        self.aligner, self.loss, self.every = aligner, loss, every

    def after_step(self, step: int) -> dict:
        if self.loss and step % self.every == 0:
            return {"align_loss": self.aligner.step()}
        return {}

    def log(self) -> dict:
        return {"alignment_ratio": self.aligner.ratios()}


def build_alignment(cfg, model, data, root: Path | None) -> WordAlignment | None:
    """The run's word alignment when it needs the lexicons (alignment loss or lexicon initialisation), else None."""
    aligner = build_aligner(cfg, model, data, root)
    if aligner is None:
        return None
    return WordAlignment(aligner, cfg.align.loss, cfg.align.every)


def build_aligner(cfg, model, data, root: Path | None) -> LexiconAligner | None:
    """The run's aligner when it needs the lexicons (alignment loss or lexicon initialisation), else None."""
    if not cfg.align.uses_lexicon:
        return None
    if root is None:
        raise DataError("the alignment loss needs the data root (MUSE dictionaries under <root>/muse)")
    return LexiconAligner(
        model.text_encoder.embed,
        data.captions.vocab.tokens,
        cfg.data.languages,
        root,
        pivot=cfg.align.pivot,
        k=cfg.align.k,
        lr=cfg.align.lr,
    )


def prepare_word_embeddings(cfg, model, alignment: WordAlignment | None) -> None:
    """``align.word_init: muse`` and ``align.freeze_words``, applied to a freshly initialised model."""
    if cfg.align.word_init == "muse":
        log.info(
            "lexicon initialisation: %d words start at their English translation", alignment.aligner.lexicon_init()
        )
    if cfg.align.freeze_words:
        model.text_encoder.embed.weight.requires_grad_(False)
