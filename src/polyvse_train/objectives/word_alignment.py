"""The ``align:`` section in a run: AME's aligner (polyvse.alignment.LexiconAligner) built from the config,
stepped by the objective every ``align.every`` iterations; docs/methods/ame.md."""
from __future__ import annotations

import logging
from pathlib import Path

from polyvse.alignment import LexiconAligner
from polyvse.errors import DataError

log = logging.getLogger("polyvse.train")


def build_aligner(cfg, model, data, root: Path | None) -> LexiconAligner | None:
    """The run's aligner when it needs the lexicons (alignment loss or lexicon initialisation), else None."""
    if not cfg.align.uses_lexicon:
        return None
    if root is None:
        raise DataError("the alignment loss needs the data root (MUSE dictionaries under <root>/muse)")
    return LexiconAligner(model.text_encoder.embed, data.captions.vocab.tokens, cfg.data.languages, root,
                          pivot=cfg.align.pivot, k=cfg.align.k, lr=cfg.align.lr)


def alignment_every(cfg, smoke: bool) -> int:
    """Iterations between alignment steps; a smoke run is a dozen steps, so it aligns every 2."""
    return min(cfg.align.every, 2) if smoke else cfg.align.every


def prepare_word_embeddings(cfg, model, aligner: LexiconAligner | None) -> None:
    """``align.word_init: muse`` and ``align.freeze_words``, applied to a freshly initialised model."""
    if cfg.align.word_init == "muse":
        log.info("lexicon initialisation: %d words start at their English translation", aligner.lexicon_init())
    if cfg.align.freeze_words:
        model.text_encoder.embed.weight.requires_grad_(False)
