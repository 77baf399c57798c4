"""AME's alignment model (Mohammadshahi et al. 2019): word embeddings kept aligned across languages during
retrieval training, through the MUSE lexicons."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import nn

from .lexicon import filter_lexicon, muse_lexicon
from .rcsls import rcsls_loss
from .word_translation import alignment_ratio

log = logging.getLogger("polyvse.alignment")


def vocabulary_words(tokens: Sequence[str], lang: str) -> tuple[torch.Tensor, dict[str, int]]:
    """(rows of ``lang``'s words in an embedding table, word -> position among them) for a vocabulary whose
    tokens are ``"<lang>:<word>"``."""
    ids = [i for i, t in enumerate(tokens) if t.startswith(f"{lang}:")]
    return torch.tensor(ids, dtype=torch.long), {tokens[i][len(lang) + 1 :]: j for j, i in enumerate(ids)}


class LexiconAligner(nn.Module):
    """AME's alignment model (Sec. 3.2 and 4.1): an RCSLS loss between the word embeddings of each language and
    those of the ``pivot`` language (English), through a translator W_l per language, on the TRAIN part of the
    MUSE lexicon (:func:`muse_lexicon`, filtered to the vocabulary). Each :meth:`step` is one plain SGD step at
    ``lr`` that updates W_l AND the word embeddings (that is what keeps fine-tuned embeddings aligned); the
    caller decides how often (AME: every T iterations). Vectors are L2-normalised (Joulin et al., as AME says).
    :meth:`ratios` is the alignment ratio (NN word translation P@1) per language on the TEST part filtered to
    the vocabulary: source words the aligner and the lexicon initialisation never saw. (AME trains on MUSE
    "full" + "test" and evaluates on "train", a subset of "full": that measures memorisation, so it is not
    followed here.)

    ``embed`` is the word embedding table (not a submodule: it belongs to the model being trained), ``tokens``
    its vocabulary as ``"<lang>:<word>"`` strings, ``root`` the data root with the MUSE dictionaries.
    """

    def __init__(
        self,
        embed: nn.Embedding,
        tokens: Sequence[str],
        languages: Sequence[str],
        root: Path,
        *,
        pivot: str = "en",
        k: int = 5,
        lr: float = 2.0,
    ):
        super().__init__()
        self.embed = [embed]
        self.k = k
        self.tgt_ids, tgt_words = vocabulary_words(tokens, pivot)
        self.langs, self.src_ids, self.train_pairs, self.eval_pairs = [], {}, {}, {}
        self.W = nn.ParameterDict()
        for lang in languages:
            if lang == pivot:
                continue
            src_ids, src_words = vocabulary_words(tokens, lang)
            train_idx, _ = filter_lexicon(muse_lexicon(root, lang, pivot, "train"), src_words, tgt_words)
            eval_idx, _ = filter_lexicon(muse_lexicon(root, lang, pivot, "test"), src_words, tgt_words)
            if len(train_idx) == 0 or min(len(src_ids), len(self.tgt_ids)) < 2:
                log.warning("no MUSE %s-%s pairs in the vocabulary; %s is not aligned", lang, pivot, lang)
                continue
            self.langs.append(lang)
            self.src_ids[lang], self.train_pairs[lang], self.eval_pairs[lang] = src_ids, train_idx, eval_idx
            self.W[lang] = nn.Parameter(torch.eye(embed.embedding_dim))
        self.optimiser = torch.optim.SGD(list(self.W.values()) + [embed.weight], lr=lr)

    def lexicon_init(self) -> int:
        """Start every lexicon word at its (first) pivot translation's vector: the seed alignment that AME gets
        from FastText's aligned vectors. Returns the number of words set."""
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
        E = self.embed[0].weight
        tgt_all = E[self.tgt_ids]
        terms = []
        for lang in self.langs:
            pairs, W = self.train_pairs[lang], self.W[lang]
            src_all = E[self.src_ids[lang]] @ W
            k = min(self.k, src_all.shape[0], tgt_all.shape[0])
            terms.append(rcsls_loss(src_all[pairs[:, 0]], tgt_all[pairs[:, 1]], src_all, tgt_all, k=k, normalize=True))
        return torch.stack(terms).sum() if terms else E.sum() * 0

    def step(self) -> float:
        """One alignment step; returns its loss."""
        loss = self.loss()
        self.optimiser.zero_grad(set_to_none=True)
        loss.backward()
        self.optimiser.step()
        return float(loss.item())

    @torch.no_grad()
    def ratios(self) -> dict[str, float]:
        """Alignment ratio (NN P@1, %) per aligned language on the held-out lexicon pairs."""
        E = self.embed[0].weight
        out = {}
        for lang in self.langs:
            pairs = self.eval_pairs[lang]
            if len(pairs) == 0:
                continue
            out[lang] = round(alignment_ratio(E[self.src_ids[lang]] @ self.W[lang], E[self.tgt_ids], pairs), 2)
        return out
