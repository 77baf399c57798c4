"""One place that turns a batch into the loss of each training objective.

    vse       batches of captions of distinct photos, languages mixed; bidirectional hinge over in-batch
              negatives (sum, max-violation or top-K). The demo; VSE / order embeddings / VSE++ / AME.
    pivot     batches of distinct photos with one caption per language (Gella et al. PIVOT, Eq. 1)
    parallel  pivot + the caption-caption term between every pair of languages (Gella et al. PARALLEL, Eq. 2)
    mlmme     beta * R_MM + (1 - beta) * R_ML (Calixto & Liu, Eq. 3)
    mule      batches of distinct photos with several captions per language (MULE's quotas); top-K
              image-sentence hinge (lambda_3 = 1) + neighbourhood constraints on the universal and the
              sentence layer (lambda_1) + adversarial language classifier through gradient reversal
              (lambda_2); the first ``lp_epochs`` epochs are MULE's "LP" pretraining on caption pairs.

Photos lacking a language keep their place in tuple batches; the losses mask their empty slots.
An ``Objective`` also owns the parameters that are not part of the retrieval model (MULE's language
classifier, AME's translators) and AME's word-alignment step (``after_step``), which runs every T iterations
with its own optimiser and learning rate.
"""
from __future__ import annotations

import logging
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import torch
from torch import nn

from polyvse.errors import DataError
from polyvse.losses import (GroupedHingeLoss, HingeRankingLoss, LanguageAdversarialLoss, LanguageClassifier,
                            MlmmeLoss, NeighbourhoodConstraintLoss, ParallelLoss, PivotLoss, every_negative)
from polyvse.losses.adversarial import masked_mean
from polyvse.sampling import (DistinctPhotoBatchSampler, GroupBalancedBatchSampler, InterleavedTextTupleSampler,
                              PhotoTupleBatchSampler, RepeatedPassSampler, StagedSampler, TextTupleBatchSampler)

from .distributed import gather_with_grad, shard
from .text_corpus import text_tuple_loss
from .translator import TranslatorSchedule

log = logging.getLogger("polyvse.train")
OBJECTIVES = ("vse", "pivot", "parallel", "mlmme", "mule")
SAMPLERS = ("distinct", "group_balanced")  # TrainConfig.sampler


def batch_scores(model, forward, data, idx, dist_info) -> torch.Tensor:
    """Score matrix of a global batch of captions. Each rank embeds its slice; embeddings are gathered with
    gradients."""
    local = shard(idx, dist_info) if dist_info.enabled else np.asarray(idx)
    ids, lengths = data.captions.pad([data.train.ids[i] for i in local])
    langs = [data.train.langs[i] for i in local] if model.needs_language else None
    if langs is None:
        image_emb, text_emb = forward(data.features[data.train.photo_row[local]], ids, lengths)
    else:
        image_emb, text_emb = forward(data.features[data.train.photo_row[local]], ids, lengths, langs)
    if dist_info.enabled:
        sizes = [len(s) for s in np.array_split(np.asarray(idx), dist_info.world_size)]
        image_emb = gather_with_grad(image_emb, dist_info, sizes)
        text_emb = gather_with_grad(text_emb, dist_info, sizes)
    return model.scores(image_emb, text_emb)


class Objective(nn.Module):
    """Builds the sampler and computes the loss of one batch; see the module docstring."""

    def __init__(self, cfg, model, data, root: Path | None = None, smoke: bool = False):
        super().__init__()
        if cfg.objective not in OBJECTIVES:
            raise DataError(f"objective {cfg.objective!r}: use one of {', '.join(OBJECTIVES)}")
        self.cfg, self.kind = cfg, cfg.objective
        if cfg.sampler not in SAMPLERS:
            raise DataError(f"sampler {cfg.sampler!r}: use one of {', '.join(SAMPLERS)}")
        if cfg.sampler == "group_balanced" and self.kind == "vse":
            raise DataError("sampler group_balanced draws photos with their captions per language: use it with "
                            "objective pivot, parallel, mlmme or mule (objective vse samples captions)")
        self.model = [model]  # a list: the model is not a submodule (its weights live in the checkpoint)
        self.data = data
        top_k = cfg.top_k or None
        if cfg.max_violation and top_k not in (None, 1):
            raise DataError("max_violation means top_k 1; set one of them")
        if cfg.hard_negative_warmup_epochs < 0:
            raise DataError(f"hard_negative_warmup_epochs must be 0 or more, got {cfg.hard_negative_warmup_epochs}")
        rank = dict(max_violation=cfg.max_violation and top_k is None, top_k=top_k)
        sim = model.similarity
        if self.kind == "vse":
            self.ranking = HingeRankingLoss(cfg.margin, **rank)
        elif self.kind in ("pivot", "parallel", "mlmme"):
            quotas = cfg.quotas or {lang: 1 for lang in cfg.languages}
            if any(q != 1 for q in quotas.values()):
                raise DataError(f"objective {self.kind} pairs one caption per language with each photo; "
                                f"quotas must all be 1, got {quotas}")
            if self.kind == "pivot":
                self.multi = PivotLoss(sim, cfg.margin, **rank)
            elif self.kind == "parallel":
                self.multi = nn.ModuleList([PivotLoss(sim, cfg.margin, **rank), ParallelLoss(sim, cfg.margin, **rank)])
            else:
                self.multi = MlmmeLoss(cfg.beta, cfg.margin, similarity=sim, **rank)
        else:  # mule
            self.matching = GroupedHingeLoss(cfg.margin, **rank)
            self.neighbourhood = NeighbourhoodConstraintLoss(cfg.nc_margin, top_k=top_k)
            if cfg.lc_weight > 0:
                u_dim = model.config.universal_dim or model.config.pretrained_dim or model.config.word_dim
                self.language_loss = LanguageAdversarialLoss(LanguageClassifier(u_dim, len(cfg.languages)))
        if cfg.word_init not in ("random", "muse"):
            raise DataError(f"word_init {cfg.word_init!r}: use random or muse")
        # The lexicons serve the alignment loss, the lexicon initialisation and the alignment ratio.
        self.aligner = WordAligner(cfg, model, data, root, smoke) if cfg.align or cfg.word_init == "muse" else None
        self.lp_epochs = min(cfg.lp_epochs, 1) if smoke else cfg.lp_epochs  # a smoke run keeps one LP epoch
        # The Translator's source stage + language map (polyvse_train.translator)
        self.translator = (TranslatorSchedule(cfg, model, data, root, smoke)
                           if cfg.source_language or cfg.language_map else None)
        # epochs before the main schedule (its lr decay counts from here): MULE's LP, the Translator's source
        self.pre_epochs = self.lp_epochs + (self.translator.source_epochs if self.translator else 0)

    # -- sampling ------------------------------------------------------------------------------------
    def sampler(self):
        sampler = self._sampler()
        if self.cfg.min_batches_per_epoch > 0:
            sampler = (StagedSampler(RepeatedPassSampler(sampler.first, self.cfg.min_batches_per_epoch),
                                     RepeatedPassSampler(sampler.second, self.cfg.min_batches_per_epoch),
                                     sampler.switch_epoch)
                       if isinstance(sampler, StagedSampler)
                       else RepeatedPassSampler(sampler, self.cfg.min_batches_per_epoch))
        text = getattr(self.data, "text_tuples", None)
        if text is not None:  # cfg.text_corpus: text-only tuple batches ride along with the image batches
            cfg = self.cfg
            sampler = InterleavedTextTupleSampler(sampler, TextTupleBatchSampler(
                text.tuple_index, text.langs, cfg.quotas or {lang: 1 for lang in cfg.languages},
                cfg.batch_size, cfg.text_tuples_per_epoch, seed=cfg.seed))
        return sampler

    def _sampler(self):
        cfg, train = self.cfg, self.data.train
        if self.kind == "vse":
            def make(caption_photo):
                return DistinctPhotoBatchSampler(caption_photo, cfg.batch_size, seed=cfg.seed)
            if self.translator is not None:
                return self.translator.wrap_sampler(make, train.photo_row, train.langs)
            return make(train.photo_row)
        quotas = cfg.quotas or {lang: 1 for lang in cfg.languages}
        unknown = sorted(set(quotas) - set(cfg.languages))
        if unknown:
            raise DataError(f"quotas name languages {unknown} that are not in languages {cfg.languages}")
        if cfg.sampler == "group_balanced":  # MULE: equal shares of the photo groups in every batch
            return GroupBalancedBatchSampler(train.photo_row, train.langs, quotas, cfg.batch_size, seed=cfg.seed)
        return PhotoTupleBatchSampler(train.photo_row, train.langs, quotas, cfg.batch_size, seed=cfg.seed)

    # -- losses --------------------------------------------------------------------------------------
    def forward(self, forward, batch, dist_info, epoch: int) -> tuple[torch.Tensor, dict]:
        with every_negative(self) if self.warming_up(epoch) else nullcontext():
            loss, parts = self._batch_loss(forward, batch, dist_info, epoch)
            if isinstance(batch, tuple) and len(batch) == 3 and batch[2]:  # + text-only tuples (cfg.text_corpus)
                text = text_tuple_loss(self, self.model[0], batch[2], epoch)
                if text is not None:
                    loss = loss + text
                    parts["text_tuples"] = text.item()
        return loss, parts

    def _batch_loss(self, forward, batch, dist_info, epoch: int) -> tuple[torch.Tensor, dict]:
        model = self.model[0]
        if self.kind == "vse":
            return self.ranking(batch_scores(model, forward, self.data, batch, dist_info)), {}
        if dist_info.enabled:
            raise DataError(f"objective {self.kind!r} runs in one process; DDP is supported for objective vse")
        photo_rows, slots = batch[0], batch[1]
        valid = slots >= 0
        flat = slots[valid]  # row-major: photo by photo, slot by slot
        ids, lengths = self.data.captions.pad([self.data.train.ids[c] for c in flat])
        langs = [self.data.train.langs[c] for c in flat]
        text, words = model.text_features(ids, lengths, langs)
        n, s = slots.shape
        if self.kind == "mule":
            return self._mule(model, photo_rows, valid, text, words, lengths, langs, epoch)
        images = model.encode_image_features(self.data.features[photo_rows])
        where = torch.as_tensor(np.flatnonzero(valid.reshape(-1)), device=text.device)
        full = text.new_zeros((n * s, text.shape[1])).index_copy(0, where, text).view(n, s, -1)
        langs_of_slot = self.sampler_slot_langs()
        captions = {lang: full[:, j] for j, lang in enumerate(langs_of_slot)}
        masks = {lang: torch.as_tensor(valid[:, j]) for j, lang in enumerate(langs_of_slot)}
        if self.kind == "pivot":
            return self.multi(images, captions, masks), {}
        if self.kind == "parallel":
            pivot, para = self.multi[0](images, captions, masks), self.multi[1](images, captions, masks)
            return pivot + para, {"pivot": pivot.item(), "parallel": para.item()}
        r_mm, r_ml = self.multi.parts(images, captions, masks)
        return self.multi.beta * r_mm + (1 - self.multi.beta) * r_ml, {"r_mm": r_mm.item(), "r_ml": r_ml.item()}

    def warming_up(self, epoch: int) -> bool:
        """True in the first ``hard_negative_warmup_epochs`` epochs of the main schedule."""
        return 0 <= epoch - self.pre_epochs < self.cfg.hard_negative_warmup_epochs

    def sampler_slot_langs(self) -> list[str]:
        quotas = self.cfg.quotas or {lang: 1 for lang in self.cfg.languages}
        return [lang for lang, q in quotas.items() for _ in range(q)]

    def _mule(self, model, photo_rows, valid, text, words, lengths, langs, epoch):
        cfg = self.cfg
        caption_image = torch.as_tensor(np.nonzero(valid)[0], dtype=torch.long)
        u = masked_mean(words, torch.arange(words.shape[1])[None, :] < lengths[:, None])  # MULE sentence u_i
        parts = {}
        if epoch < self.lp_epochs:  # LP: align the universal embedding on caption pairs before everything else
            loss = self.neighbourhood([u], caption_image)
            parts["lp"] = loss.item()
        else:
            images = model.encode_image_features(self.data.features[photo_rows])
            loss = self.matching(model.scores(images, text), caption_image)
            parts["matching"] = loss.item()
            if cfg.nc_weight > 0:
                nc = self.neighbourhood([u, text], caption_image)
                loss = loss + cfg.nc_weight * nc
                parts["nc"] = nc.item()
            if cfg.lc_weight > 0:
                index = {lang: i for i, lang in enumerate(cfg.languages)}
                lc = self.language_loss(u, torch.tensor([index[lang] for lang in langs]))
                loss = loss + cfg.lc_weight * lc
                parts["lc"] = lc.item()
        if cfg.word_l2 > 0:
            loss = loss + cfg.word_l2 * model.text_encoder.embed.weight.pow(2).sum()
        return loss, parts

    # -- hooks ---------------------------------------------------------------------------------------
    def start_epoch(self, epoch: int) -> None:
        if self.translator is not None:
            self.translator.start_epoch(epoch)

    def after_step(self, step: int) -> dict:
        if self.cfg.align and step % self.aligner.every == 0:
            return {"align_loss": self.aligner.step()}
        return {}

    def epoch_log(self) -> dict:
        out = self.translator.log() if self.translator is not None else {}
        if self.aligner is None:
            return out
        return {**out, "alignment_ratio": self.aligner.ratios()}


class WordAligner(nn.Module):
    """AME's alignment model (Mohammadshahi et al. 2019, Sec. 3.2 and 4.1): an RCSLS loss between the
    word embeddings of each language and those of ``align_pivot`` (English), through a translator W_l per
    language, on the MUSE lexicon ("full" + "test" sections, filtered to the training vocabulary); one
    step every T = ``align_every`` iterations with plain SGD at ``align_lr``, updating W_l AND the word
    embeddings (that is what keeps the fine-tuned embeddings aligned). Vectors are L2-normalised (Joulin et
    al., as AME says). The alignment ratio (NN word translation P@1 on the MUSE "train" section filtered to
    the vocabulary, RECONSTRUCTED split files) is reported per language after every epoch.
    """

    def __init__(self, cfg, model, data, root: Path | None, smoke: bool):
        super().__init__()
        from polyvse.alignment import filter_lexicon, muse_paths, read_muse_dictionary

        if root is None:
            raise DataError("the alignment loss needs the data root (MUSE dictionaries under <root>/muse)")
        self.embed = [model.text_encoder.embed]
        self.k = cfg.align_k
        # A smoke run is a dozen steps: align every 2 so the path is exercised.
        self.every = min(cfg.align_every, 2) if smoke else cfg.align_every
        pivot = cfg.align_pivot
        vocab = data.captions.vocab

        def words_of(lang: str) -> tuple[torch.Tensor, dict[str, int]]:
            ids = [i for i, t in enumerate(vocab.tokens) if t.startswith(f"{lang}:")]
            return torch.tensor(ids, dtype=torch.long), {vocab.id_to_token(i)[len(lang) + 1:]: j
                                                         for j, i in enumerate(ids)}

        tgt_ids, tgt_words = words_of(pivot)
        self.tgt_ids = tgt_ids
        self.langs, self.src_ids, self.train_pairs, self.eval_pairs = [], {}, {}, {}
        self.W = nn.ParameterDict()
        for lang in cfg.languages:
            if lang == pivot:
                continue
            src_ids, src_words = words_of(lang)
            pairs = [p for path in muse_paths(root, lang, pivot, ["full", "test"]) for p in read_muse_dictionary(path)]
            train_idx, _ = filter_lexicon(pairs, src_words, tgt_words)
            eval_idx, _ = filter_lexicon(read_muse_dictionary(muse_paths(root, lang, pivot, "train")),
                                         src_words, tgt_words)
            if len(train_idx) == 0 or min(len(src_ids), len(tgt_ids)) < 2:
                log.warning("no MUSE %s-%s pairs in the training vocabulary; %s is not aligned", lang, pivot, lang)
                continue
            self.langs.append(lang)
            self.src_ids[lang], self.train_pairs[lang], self.eval_pairs[lang] = src_ids, train_idx, eval_idx
            self.W[lang] = nn.Parameter(torch.eye(cfg.word_dim))
        self.optimiser = torch.optim.SGD(list(self.W.values()) + [model.text_encoder.embed.weight], lr=cfg.align_lr)

    def lexicon_init(self) -> int:
        """Start every lexicon word at its (first) English translation's vector: the seed alignment that
        AME gets from FastText's aligned vectors, which are not at hand. Returns the number of words set."""
        weight, done = self.embed[0].weight, 0
        with torch.no_grad():
            for lang in self.langs:
                seen = set()
                for s, t in self.train_pairs[lang].tolist():
                    if s not in seen:
                        seen.add(s)
                        weight[self.src_ids[lang][s]] = weight[self.tgt_ids[t]]
                        done += 1
        return done

    def loss(self) -> torch.Tensor:
        from polyvse.alignment import rcsls_loss

        E = self.embed[0].weight
        tgt_all = E[self.tgt_ids]
        terms = []
        for lang in self.langs:
            pairs, W = self.train_pairs[lang], self.W[lang]
            src_all = E[self.src_ids[lang]] @ W
            k = min(self.k, src_all.shape[0], tgt_all.shape[0])
            terms.append(rcsls_loss(src_all[pairs[:, 0]], tgt_all[pairs[:, 1]], src_all, tgt_all, k=k,
                                    normalize=True))
        return torch.stack(terms).sum() if terms else E.sum() * 0

    def step(self) -> float:
        loss = self.loss()
        self.optimiser.zero_grad(set_to_none=True)
        loss.backward()
        self.optimiser.step()
        return float(loss.item())

    @torch.no_grad()
    def ratios(self) -> dict[str, float]:
        from polyvse.alignment import alignment_ratio

        E = self.embed[0].weight
        out = {}
        for lang in self.langs:
            pairs = self.eval_pairs[lang]
            if len(pairs) == 0:
                continue
            out[lang] = round(alignment_ratio(E[self.src_ids[lang]] @ self.W[lang], E[self.tgt_ids], pairs), 2)
        return out
