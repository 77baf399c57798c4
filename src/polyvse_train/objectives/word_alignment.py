"""AME's word alignment step (Mohammadshahi et al. 2019), run by the objective every T iterations."""
from __future__ import annotations

import logging
from pathlib import Path

import torch
from torch import nn

from polyvse.errors import DataError

log = logging.getLogger("polyvse.train")


class WordAligner(nn.Module):
    """AME's alignment model (Mohammadshahi et al. 2019, Sec. 3.2 and 4.1): an RCSLS loss between the
    word embeddings of each language and those of ``align_pivot`` (English), through a translator W_l per
    language, on the TRAIN part of the MUSE lexicon (:func:`polyvse.alignment.muse_lexicon`, filtered to the
    training vocabulary); one step every T = ``align_every`` iterations with plain SGD at ``align_lr``,
    updating W_l AND the word embeddings (that is what keeps the fine-tuned embeddings aligned). Vectors are
    L2-normalised (Joulin et al., as AME says). The alignment ratio (NN word translation P@1) is reported per
    language after every epoch on the TEST part filtered to the vocabulary: source words the aligner and the
    lexicon initialisation never saw. (AME trains on MUSE "full" + "test" and evaluates on "train", a subset
    of "full": that measures memorisation, so it is not followed here.)
    """

    def __init__(self, cfg, model, data, root: Path | None, smoke: bool):
        super().__init__()
        from polyvse.alignment import filter_lexicon, muse_lexicon

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
            train_idx, _ = filter_lexicon(muse_lexicon(root, lang, pivot, "train"), src_words, tgt_words)
            eval_idx, _ = filter_lexicon(muse_lexicon(root, lang, pivot, "test"), src_words, tgt_words)
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
