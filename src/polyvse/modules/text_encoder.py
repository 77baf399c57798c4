"""Sentence encoders over word ids: shared or per-language, GRU / LSTM / mean-pooled word embeddings,
optionally through MULE's per-language projection into a universal word embedding.

Word ids come from one vocabulary whose entries are language-tagged (``en:dog``, ``de:hund``), so every
language already has its own word embeddings in the one table. What may be shared or per-language is the
rest of the branch:

    ids -> word embeddings (one table; rows are per-language by construction)
        -> [Translator: per-language d x d map into the source language's word space (language_mapping)]
        -> [MULE: per-language Linear(word_dim -> universal_dim), the "universal embedding"]
        -> pooler: last hidden state of a GRU / LSTM, or the mean of the word vectors
        -> Linear into the joint space

``sharing="shared"``: one pooler + projection for all languages (AME, MULE, the demo);
``sharing="per_language"``: one pooler + projection per language (Gella's PIVOT/PARALLEL, Calixto & Liu,
MULE's PARALLEL-EmbN baseline). Per-language parts need each row's language (``langs``: a (batch,) tensor of
indices into ``languages``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence

from .language_mapping import LanguageMapping

CELLS = {"gru": nn.GRU, "lstm": nn.LSTM}
ENCODERS = ("gru", "lstm", "mean")


def masked_mean_pool(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Mean over the first lengths[i] steps of x[i] (x: (batch, T, d))."""
    steps = torch.arange(x.shape[1], device=x.device)[None, :] < lengths.to(x.device)[:, None]
    m = steps.to(x.dtype).unsqueeze(-1)
    return (x * m).sum(1) / m.sum(1).clamp(min=1)


class RecurrentPooler(nn.Module):
    """GRU or LSTM over word vectors -> last hidden state (both directions if bidirectional)."""

    def __init__(
        self,
        cell: str,
        in_dim: int,
        hidden_dim: int,
        num_layers: int = 1,
        bidirectional: bool = False,
        dropout: float = 0.0,
    ):
        super().__init__()
        self.rnn = CELLS[cell](
            in_dim,
            hidden_dim,
            num_layers=num_layers,
            batch_first=True,
            bidirectional=bidirectional,
            dropout=dropout if num_layers > 1 else 0.0,
        )
        self.out_dim = hidden_dim * (2 if bidirectional else 1)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        packed = pack_padded_sequence(x, lengths.cpu().clamp(min=1), batch_first=True, enforce_sorted=False)
        _, h = self.rnn(packed)
        if isinstance(h, tuple):  # LSTM: (h, c)
            h = h[0]
        return torch.cat([h[-2], h[-1]], dim=-1) if self.rnn.bidirectional else h[-1]


class TextEncoder(nn.Module):
    """The general text branch (module docstring). ``forward(ids, lengths, langs=None) -> (batch, embed_dim)``;
    ``features(...)`` also returns the per-word universal features (MULE's u_i before pooling) for losses."""

    def __init__(
        self,
        vocab_size: int,
        word_dim: int = 300,
        hidden_dim: int = 1024,
        embed_dim: int = 1024,
        num_layers: int = 1,
        bidirectional: bool = False,
        dropout: float = 0.0,
        cell: str = "gru",
        sharing: str = "shared",
        languages: Sequence[str] = (),
        universal_dim: int = 0,
        language_map: Sequence[str] = (),
    ):
        super().__init__()
        if cell not in ENCODERS:
            raise ValueError(f"unknown text encoder {cell!r}; available: {', '.join(ENCODERS)}")
        if sharing not in ("shared", "per_language"):
            raise ValueError(f"text_sharing must be 'shared' or 'per_language', got {sharing!r}")
        self.languages = list(languages)
        if (sharing == "per_language" or universal_dim or language_map) and not self.languages:
            raise ValueError("per-language text parts need the list of languages")
        self.cell, self.sharing, self.universal_dim = cell, sharing, int(universal_dim)
        self.embed = nn.Embedding(vocab_size, word_dim, padding_idx=0)
        in_dim = word_dim
        if self.universal_dim:
            self.universal = nn.ModuleDict({lang: nn.Linear(word_dim, self.universal_dim) for lang in self.languages})
            in_dim = self.universal_dim
        # Module creation order (embed, rnn, proj) is that of the original GruTextEncoder, so the demo's
        # initialisation -- and therefore its numbers -- are unchanged.
        if sharing == "shared":
            self._make_branch(self, in_dim, hidden_dim, embed_dim, num_layers, bidirectional, dropout)
        else:
            self.branches = nn.ModuleDict()
            for lang in self.languages:
                branch = nn.Module()
                self._make_branch(branch, in_dim, hidden_dim, embed_dim, num_layers, bidirectional, dropout)
                self.branches[lang] = branch
        self.dropout = nn.Dropout(dropout)
        nn.init.uniform_(self.embed.weight, -0.1, 0.1)
        with torch.no_grad():
            self.embed.weight[0].zero_()
        # Created last, so configs without a language map keep their initialisation (and numbers).
        self.language_map = LanguageMapping(word_dim, self.languages, language_map) if language_map else None

    def _make_branch(self, owner: nn.Module, in_dim, hidden_dim, embed_dim, num_layers, bidirectional, dropout):
        if self.cell == "mean":
            owner.rnn = None
            out_dim = in_dim
        else:
            pooler = RecurrentPooler(self.cell, in_dim, hidden_dim, num_layers, bidirectional, dropout)
            owner.rnn = pooler.rnn
            out_dim = pooler.out_dim
        owner.proj = nn.Linear(out_dim, embed_dim)

    @property
    def needs_language(self) -> bool:
        return self.sharing == "per_language" or bool(self.universal_dim) or self.language_map is not None

    def _check_langs(self, langs: torch.Tensor | None, n: int) -> torch.Tensor | None:
        if not self.needs_language:
            return None
        if langs is None:
            raise ValueError(
                "this text encoder has per-language parts: pass langs, the (batch,) language "
                f"indices into {self.languages}"
            )
        langs = torch.as_tensor(langs, dtype=torch.long)
        if langs.shape != (n,):
            raise ValueError(f"langs must have shape ({n},), got {tuple(langs.shape)}")
        return langs

    def _per_language(self, x: torch.Tensor, langs: torch.Tensor, fn) -> torch.Tensor:
        """Apply fn(lang, rows_of_x) language by language and put the rows back in order."""
        out = None
        for li in torch.unique(langs).tolist():
            rows = (langs == li).nonzero(as_tuple=True)[0]
            y = fn(self.languages[li], rows)
            if out is None:
                out = y.new_zeros((x.shape[0], *y.shape[1:]))
            out = out.index_copy(0, rows.to(y.device), y)
        return out

    def _pool(self, owner: nn.Module, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        if owner.rnn is None:
            return owner.proj(masked_mean_pool(x, lengths))
        packed = pack_padded_sequence(x, lengths.cpu().clamp(min=1), batch_first=True, enforce_sorted=False)
        _, h = owner.rnn(packed)
        if isinstance(h, tuple):
            h = h[0]
        last = torch.cat([h[-2], h[-1]], dim=-1) if owner.rnn.bidirectional else h[-1]
        return owner.proj(last)

    def features(
        self, ids: torch.Tensor, lengths: torch.Tensor, langs: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(sentence embeddings (batch, embed_dim), word features fed to the pooler (batch, T, d))."""
        langs = self._check_langs(langs, ids.shape[0])
        x = self.dropout(self.embed(ids))
        if self.language_map is not None:
            x = self.language_map(x, langs)
        if self.universal_dim:
            x = self._per_language(x, langs, lambda lang, rows: self.universal[lang](x[rows]))
        if self.sharing == "shared":
            return self._pool(self, x, lengths), x
        return self._per_language(
            x, langs, lambda lang, rows: self._pool(self.branches[lang], x[rows], lengths[rows.to(lengths.device)])
        ), x

    def word_vectors(self, ids: torch.Tensor, lang: str) -> torch.Tensor:
        """The cross-lingual representation of words ``ids`` of language ``lang``: what the sentence pooler
        reads (the word embedding, after the Translator's map and MULE's universal projection when there are
        ones). Word translation
        P@1 is measured on these."""
        x = self.embed(torch.as_tensor(ids, dtype=torch.long).to(self.embed.weight.device))
        if self.language_map is not None and lang in self.language_map.maps:  # the Translator's M
            x = x @ self.language_map.maps[lang]
        if self.universal_dim:
            if lang not in self.universal:
                raise ValueError(f"no universal projection for {lang!r}; languages: {', '.join(self.languages)}")
            x = self.universal[lang](x)
        return x

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor, langs: torch.Tensor | None = None) -> torch.Tensor:
        """ids: (batch, max_len) padded with 0; lengths: (batch,) >= 1. Returns (batch, embed_dim)."""
        return self.features(ids, lengths, langs)[0]


class GruTextEncoder(TextEncoder):
    """Word embeddings -> GRU -> last hidden state -> linear projection into the joint space, one encoder
    shared by all languages over language-tagged word embeddings (as in AME; the demo model)."""

    def __init__(
        self,
        vocab_size: int,
        word_dim: int = 300,
        hidden_dim: int = 1024,
        embed_dim: int = 1024,
        num_layers: int = 1,
        bidirectional: bool = False,
        dropout: float = 0.0,
    ):
        super().__init__(vocab_size, word_dim, hidden_dim, embed_dim, num_layers, bidirectional, dropout, cell="gru")
