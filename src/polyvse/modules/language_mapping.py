"""The Translator's language map (Translator poster, "Grounding multilingual concepts with vision", Sec. 2):
a ``d x d`` matrix ``M`` per mapped language, inside the text branch, that carries the word vectors of a
low-resource (target) language into the word space of the language the sentence encoder was trained on
(the source language): the score is ``s(i, t) = cos(f(M t), g(i))``.

Rows are vectors and maps act on the right (``mapped = x @ M``), the convention of ``polyvse.alignment``.
Rows of languages without a map pass unchanged. ``fit_language_map`` gives the poster's initialisation
(SVD/Procrustes, then RCSLS) from two word-vector tables and a bilingual lexicon, through
``polyvse.alignment``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from ..alignment import fit_rcsls, procrustes, rcsls_loss


class LanguageMapping(nn.Module):
    """``forward(x, langs)``: word vectors ``x`` (batch, T, d); row ``b`` is multiplied on the right by the
    map of its language ``languages[langs[b]]`` if that language is mapped. Maps start random orthogonal
    (the poster's "randomly initialized" Translator; orthogonal keeps the word vectors' norms, so a random
    map changes what the encoder sees, not how large it is); ``set_map`` installs a fitted one."""

    def __init__(self, word_dim: int, languages: Sequence[str], mapped: Sequence[str]):
        super().__init__()
        self.languages = list(languages)
        unknown = sorted(set(mapped) - set(self.languages))
        if unknown:
            raise ValueError(
                f"language_map names {unknown}, which are not among the model's languages "
                f"{self.languages}; add them to languages or remove them from language_map"
            )
        self.maps = nn.ParameterDict()
        for lang in mapped:
            weight = torch.empty(word_dim, word_dim)
            nn.init.orthogonal_(weight)
            self.maps[lang] = nn.Parameter(weight)

    @property
    def mapped(self) -> list[str]:
        return list(self.maps.keys())

    def forward(self, x: torch.Tensor, langs: torch.Tensor) -> torch.Tensor:
        out = x
        for lang, weight in self.maps.items():
            rows = (langs == self.languages.index(lang)).nonzero(as_tuple=True)[0].to(x.device)
            if rows.numel():
                out = out.index_copy(0, rows, x[rows] @ weight)
        return out

    @torch.no_grad()
    def set_map(self, lang: str, weight: torch.Tensor) -> None:
        if lang not in self.maps:
            raise KeyError(f"no language map for {lang!r}; mapped languages: {self.mapped}")
        if weight.shape != self.maps[lang].shape:
            raise ValueError(
                f"a map for {lang!r} must have shape {tuple(self.maps[lang].shape)}, got {tuple(weight.shape)}"
            )
        self.maps[lang].copy_(weight.to(self.maps[lang].dtype))


@dataclass
class LanguageMapFit:
    weight: torch.Tensor  # (d, d): src @ weight ~ tgt
    pairs: int  # lexicon pairs used
    procrustes_loss: float  # RCSLS loss of the Procrustes (SVD) solution
    rcsls_loss: float  # RCSLS loss after the refinement


def fit_language_map(
    src_vectors: torch.Tensor,
    tgt_vectors: torch.Tensor,
    pairs: torch.Tensor,
    *,
    rcsls_epochs: int = 10,
    k: int = 10,
    lr: float = 1.0,
) -> LanguageMapFit:
    """The poster's Translator initialisation: SVD (orthogonal Procrustes) on the lexicon pairs, then RCSLS
    (Joulin et al. 2018) refinement for ``rcsls_epochs`` full-batch steps, both from ``polyvse.alignment``.

    src_vectors: (N_s, d) word vectors of the mapped (target) language; tgt_vectors: (N_t, d) those of the
    language mapped into (source); pairs: (n, 2) row indices (src row, tgt row), a translation each.
    Rows are L2-normalised first, as the reference RCSLS code does; the neighbourhood sets are the whole
    tables (k is capped at their sizes). The map is applied to the raw vectors afterwards: an orthogonal
    map preserves norms, RCSLS stays close to the Procrustes solution.
    """
    pairs = torch.as_tensor(pairs, dtype=torch.long)
    if pairs.dim() != 2 or pairs.shape[1] != 2 or pairs.shape[0] == 0:
        raise ValueError(f"pairs must be a non-empty (n, 2) index tensor, got shape {tuple(pairs.shape)}")
    src_all = F.normalize(src_vectors.detach().float(), dim=1, eps=1e-8)
    tgt_all = F.normalize(tgt_vectors.detach().float(), dim=1, eps=1e-8)
    X, Y = src_all[pairs[:, 0]], tgt_all[pairs[:, 1]]
    k = max(1, min(int(k), src_all.shape[0], tgt_all.shape[0]))
    init = procrustes(X, Y)
    history: list[float] = []
    weight = fit_rcsls(X, Y, src_all, tgt_all, init=init, epochs=rcsls_epochs, lr=lr, k=k, history=history)
    after = float(rcsls_loss(X @ weight, Y, src_all @ weight, tgt_all, k=k))
    return LanguageMapFit(weight=weight, pairs=int(pairs.shape[0]), procrustes_loss=history[0], rcsls_loss=after)
