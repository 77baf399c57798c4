"""translator: the Translator's training schedule (poster "Grounding multilingual concepts with vision",
Sec. 2-3), objective vse in two stages (its options are vse's and the stages').

    source stage   ``source_epochs`` epochs on the ``source_language`` captions only (the poster's de model:
                   its text encoder and image head are what "initialized with de weights" means here)
    target stage   then ``epochs`` epochs on the captions of the other languages only; the word vectors of the
                   ``language_map`` languages pass a d x d map M into the source language's word space
                   (``polyvse.modules.language_mapping``), and M is trained with the rest unless frozen

At the start of the target stage a ``lexicon`` map is initialised as the poster does: SVD (orthogonal
Procrustes) on the MUSE <lang>-<source> lexicon (its train part, ``polyvse.alignment.muse_lexicon``,
filtered to the training vocabularies, so the test part stays unseen for word-translation P@1), refined
with RCSLS -- both from ``polyvse.alignment``. A ``random`` map keeps its random orthogonal start.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from polyvse.errors import DataError
from polyvse.modules.language_mapping import fit_language_map

from ..sampling import CaptionSubsetSampler, StagedSampler
from ..sections import at_least, one_of
from .vse import VseObjective, VseOptions

log = logging.getLogger("polyvse.train")
LANGUAGE_MAP_INITS = ("random", "lexicon")


@dataclass
class TranslatorOptions(VseOptions):
    """A source stage trains the model on ``source_language`` captions only, then the target stage trains on the
    other languages' captions, whose word vectors pass ``model.language_map`` into the source language's word
    space (module docstring)."""

    source_language: str = ""  # "" = no source stage
    source_epochs: int = 0  # epochs of the source stage, before the `epochs` of the target stage
    language_map_init: str = "random"  # random (orthogonal) | lexicon (MUSE: Procrustes/SVD, then RCSLS)
    language_map_rcsls_epochs: int = 10  # RCSLS refinement steps after the Procrustes solution
    language_map_k: int = 10  # RCSLS neighbourhood size (Joulin et al.: 10)
    freeze_language_map: bool = False  # the map gets no gradient during retrieval training

    def check(self, fail) -> None:
        super().check(fail)
        one_of(fail, self, "language_map_init", LANGUAGE_MAP_INITS)
        for name in ("source_epochs", "language_map_rcsls_epochs"):
            at_least(fail, self, name, 0)
        at_least(fail, self, "language_map_k", 1)
        if self.draw_captions:
            fail("draw_captions", "the Translator's stages choose their captions by language; set 0")
        if (self.language_map_init == "lexicon" or self.source_epochs > 0) and not self.source_language:
            fail(
                "source_language",
                "language_map_init lexicon and source_epochs need source_language (the "
                "language the map goes into and the source stage trains on)",
            )

    def check_config(self, cfg, fail) -> None:
        super().check_config(cfg, fail)
        langs, language_map = cfg.data.languages, cfg.model.language_map
        if not self.source_language and not language_map:
            fail(
                "source_language",
                "the Translator needs a source stage (source_language) or a map "
                "(model.language_map); without either it is objective vse",
            )
        if self.source_language and self.source_language not in langs:
            fail("source_language", f"{self.source_language!r} is not among data.languages {langs}; add it")
        if self.source_language and self.source_language in language_map:
            fail(
                "source_language",
                f"model.language_map {language_map} maps INTO {self.source_language!r}; leave it out of the map",
            )


def vocabulary_rows(vocab, lang: str) -> dict[str, int]:
    """``{word: row of the word-embedding table}`` for the words of ``lang`` in a language-tagged vocabulary."""
    prefix = f"{lang}:"
    return {t[len(prefix) :]: i for i, t in enumerate(vocab.tokens) if t.startswith(prefix)}


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

    def __init__(self, cfg, model, data, root: Path | None):
        self.cfg, self.model, self.data, self.root = cfg, model, data, root
        self.options = opts = cfg.objective.options
        if opts.language_map_init == "lexicon" and root is None:
            raise DataError("language_map_init lexicon needs the data root (MUSE dictionaries under <root>/muse)")
        self.source_epochs = opts.source_epochs  # a smoke run keeps one (SmokeSection.caps)
        self.targets = [lang for lang in cfg.data.languages if lang != opts.source_language]
        if opts.freeze_language_map and model.text_encoder.language_map is not None:
            for p in model.text_encoder.language_map.parameters():
                p.requires_grad_(False)
        self.fits: dict[str, dict] = {}

    def wrap_sampler(self, make, caption_photo, caption_lang):
        """``make(caption_photo)`` -> a sampler; with a source language, the source stage samples its captions
        and the target stage those of the other languages."""
        if not self.options.source_language:
            return make(caption_photo)
        langs = np.asarray(caption_lang)
        source_rows = np.flatnonzero(langs == self.options.source_language)
        target_rows = np.flatnonzero(langs != self.options.source_language)
        if len(target_rows) == 0:
            raise DataError(
                f"no training caption outside source_language {self.options.source_language!r}: the "
                "target stage has nothing to train on"
            )
        target = CaptionSubsetSampler(caption_photo, target_rows, make)
        if self.source_epochs == 0:
            return target
        if len(source_rows) == 0:
            raise DataError(
                f"source_epochs {self.options.source_epochs} but no training caption in "
                f"source_language {self.options.source_language!r}"
            )
        return StagedSampler(CaptionSubsetSampler(caption_photo, source_rows, make), target, self.source_epochs)

    def start_epoch(self, epoch: int) -> None:
        """At the first target-stage epoch, fit the lexicon maps (the source stage has shaped the source
        language's word vectors by then)."""
        if epoch != self.source_epochs or self.options.language_map_init != "lexicon":
            return
        embed = self.model.text_encoder.embed.weight
        mapping = self.model.text_encoder.language_map
        for lang in mapping.mapped:
            src_rows, tgt_rows, pairs = lexicon_rows(
                self.root, self.data.captions.vocab, lang, self.options.source_language
            )
            if len(pairs) == 0:
                log.warning(
                    "no MUSE %s-%s pair in the training vocabulary; the %s map keeps its random start",
                    lang,
                    self.options.source_language,
                    lang,
                )
                self.fits[lang] = {"pairs": 0}
                continue
            fit = fit_language_map(
                embed[src_rows],
                embed[tgt_rows],
                pairs,
                rcsls_epochs=self.options.language_map_rcsls_epochs,
                k=self.options.language_map_k,
            )
            mapping.set_map(lang, fit.weight)
            self.fits[lang] = {
                "pairs": fit.pairs,
                "procrustes_rcsls_loss": round(fit.procrustes_loss, 4),
                "rcsls_loss": round(fit.rcsls_loss, 4),
            }
            log.info(
                "language map %s -> %s: %d lexicon pairs, RCSLS loss %.4f (Procrustes) -> %.4f",
                lang,
                self.options.source_language,
                fit.pairs,
                fit.procrustes_loss,
                fit.rcsls_loss,
            )

    def log(self) -> dict:
        return {"language_map_fit": dict(self.fits)} if self.fits else {}


class TranslatorObjective(VseObjective):
    """Objective vse with the Translator's stages (``objective: {name: translator, translator: {...}}``)."""

    name = "translator"
    Options = TranslatorOptions

    def __init__(self, cfg, model, data, root=None):
        super().__init__(cfg, model, data, root)
        self.translator = TranslatorSchedule(cfg, model, data, root)

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
