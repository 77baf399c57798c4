"""translator: the Translator's training schedule (poster "Grounding multilingual concepts with vision",
Sec. 2-3), objective vse in two stages.

    source stage   ``source_epochs`` epochs on the ``source_language`` captions only (the poster's de model:
                   its text encoder and image head are what "initialized with de weights" means here)
    target stage   then ``epochs`` epochs on the captions of the other languages only; the word vectors of the
                   ``language_map`` languages pass a d x d map M into the source language's word space
                   (``polyvse.models.language_mapping``), and M is trained with the rest unless frozen

At the start of the target stage a ``lexicon`` map is initialised as the poster does: SVD (orthogonal
Procrustes) on the MUSE <lang>-<source> lexicon (its train part, ``polyvse.alignment.muse_lexicon``,
filtered to the training vocabularies, so the test part stays unseen for word-translation P@1), refined
with RCSLS -- both from ``polyvse.alignment``. A ``random`` map keeps its random orthogonal start.
"""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import torch

from polyvse.sampling import CaptionSubsetSampler, StagedSampler
from polyvse.errors import DataError
from polyvse.models.language_mapping import fit_language_map

from .vse import VseObjective

log = logging.getLogger("polyvse.train")


def vocabulary_rows(vocab, lang: str) -> dict[str, int]:
    """``{word: row of the word-embedding table}`` for the words of ``lang`` in a language-tagged vocabulary."""
    prefix = f"{lang}:"
    return {t[len(prefix):]: i for i, t in enumerate(vocab.tokens) if t.startswith(prefix)}


def lexicon_rows(root: Path, vocab, src: str, tgt: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(rows of ``src`` words, rows of ``tgt`` words, (n, 2) lexicon pairs as positions in those two lists):
    the train part of the MUSE ``src``-``tgt`` dictionary filtered to the training vocabulary."""
    from polyvse.alignment import filter_lexicon, muse_lexicon, vocabulary_words

    tokens = vocab.tokens
    (src_rows, src_pos), (tgt_rows, tgt_pos) = vocabulary_words(tokens, src), vocabulary_words(tokens, tgt)
    pairs, _ = filter_lexicon(muse_lexicon(root, src, tgt, "train"), src_pos, tgt_pos)
    return src_rows, tgt_rows, pairs


class TranslatorSchedule:
    """Checks the Translator fields, builds the staged sampler and initialises the map (module docstring)."""

    def __init__(self, cfg, model, data, root: Path | None, smoke: bool):
        self.cfg, self.model, self.data, self.root = cfg, model, data, root
        source = cfg.objective.source_language
        if cfg.objective.language_map_init == "lexicon" and root is None:
            raise DataError("language_map_init lexicon needs the data root (MUSE dictionaries under <root>/muse)")
        self.source_epochs = min(cfg.objective.source_epochs, 1) if smoke else cfg.objective.source_epochs
        self.targets = [lang for lang in cfg.data.languages if lang != source]
        if cfg.objective.freeze_language_map and model.text_encoder.language_map is not None:
            for p in model.text_encoder.language_map.parameters():
                p.requires_grad_(False)
        self.fits: dict[str, dict] = {}

    def wrap_sampler(self, make, caption_photo, caption_lang):
        """``make(caption_photo)`` -> a sampler; with a source language, the source stage samples its captions
        and the target stage those of the other languages."""
        if not self.cfg.objective.source_language:
            return make(caption_photo)
        langs = np.asarray(caption_lang)
        source_rows = np.flatnonzero(langs == self.cfg.objective.source_language)
        target_rows = np.flatnonzero(langs != self.cfg.objective.source_language)
        if len(target_rows) == 0:
            raise DataError(f"no training caption outside source_language {self.cfg.objective.source_language!r}: the "
                            "target stage has nothing to train on")
        target = CaptionSubsetSampler(caption_photo, target_rows, make)
        if self.source_epochs == 0:
            return target
        if len(source_rows) == 0:
            raise DataError(f"source_epochs {self.cfg.objective.source_epochs} but no training caption in "
                            f"source_language {self.cfg.objective.source_language!r}")
        return StagedSampler(CaptionSubsetSampler(caption_photo, source_rows, make), target, self.source_epochs)

    def start_epoch(self, epoch: int) -> None:
        """At the first target-stage epoch, fit the lexicon maps (the source stage has shaped the source
        language's word vectors by then)."""
        if epoch != self.source_epochs or self.cfg.objective.language_map_init != "lexicon":
            return
        embed = self.model.text_encoder.embed.weight
        mapping = self.model.text_encoder.language_map
        for lang in mapping.mapped:
            src_rows, tgt_rows, pairs = lexicon_rows(self.root, self.data.captions.vocab, lang,
                                                     self.cfg.objective.source_language)
            if len(pairs) == 0:
                log.warning("no MUSE %s-%s pair in the training vocabulary; the %s map keeps its random start",
                            lang, self.cfg.objective.source_language, lang)
                self.fits[lang] = {"pairs": 0}
                continue
            fit = fit_language_map(embed[src_rows], embed[tgt_rows], pairs,
                                   rcsls_epochs=self.cfg.objective.language_map_rcsls_epochs,
                                   k=self.cfg.objective.language_map_k)
            mapping.set_map(lang, fit.weight)
            self.fits[lang] = {"pairs": fit.pairs, "procrustes_rcsls_loss": round(fit.procrustes_loss, 4),
                               "rcsls_loss": round(fit.rcsls_loss, 4)}
            log.info("language map %s -> %s: %d lexicon pairs, RCSLS loss %.4f (Procrustes) -> %.4f",
                     lang, self.cfg.objective.source_language, fit.pairs, fit.procrustes_loss, fit.rcsls_loss)

    def log(self) -> dict:
        return {"language_map_fit": dict(self.fits)} if self.fits else {}


class TranslatorObjective(VseObjective):
    """Objective vse with the Translator's stages: chosen for objective vse when ``source_language`` or
    ``language_map`` is set (``polyvse_train.objectives.objective_name``)."""

    name = "translator"

    def __init__(self, cfg, model, data, root=None, smoke: bool = False):
        super().__init__(cfg, model, data, root, smoke)
        self.translator = TranslatorSchedule(cfg, model, data, root, smoke)

    @property
    def pre_epochs(self) -> int:
        return self.translator.source_epochs

    def batch_sampler(self):
        train = self.data.train
        return self.translator.wrap_sampler(self.make_sampler, train.photo_row, train.langs)

    def start_epoch(self, epoch: int) -> None:
        self.translator.start_epoch(epoch)  # the map's lexicon initialisation at the target stage

    def epoch_log(self) -> dict:
        return {**self.translator.log(), **super().epoch_log()}
