"""Recurrent sentence encoder over word ids (one encoder shared by all languages)."""
from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence


class GruTextEncoder(nn.Module):
    """Word embeddings -> GRU -> last hidden state -> linear projection into the joint space.

    Word ids come from one vocabulary whose entries are language-tagged (``en:dog``, ``de:hund``), so each
    language has its own word embeddings while the recurrent encoder is shared, as in AME.
    """

    def __init__(self, vocab_size: int, word_dim: int = 300, hidden_dim: int = 1024, embed_dim: int = 1024,
                 num_layers: int = 1, bidirectional: bool = False, dropout: float = 0.0):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, word_dim, padding_idx=0)
        self.rnn = nn.GRU(word_dim, hidden_dim, num_layers=num_layers, batch_first=True,
                          bidirectional=bidirectional, dropout=dropout if num_layers > 1 else 0.0)
        out_dim = hidden_dim * (2 if bidirectional else 1)
        self.proj = nn.Linear(out_dim, embed_dim)
        self.dropout = nn.Dropout(dropout)
        nn.init.uniform_(self.embed.weight, -0.1, 0.1)
        with torch.no_grad():
            self.embed.weight[0].zero_()

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """ids: (batch, max_len) padded with 0; lengths: (batch,) >= 1. Returns (batch, embed_dim)."""
        x = self.dropout(self.embed(ids))
        packed = pack_padded_sequence(x, lengths.cpu().clamp(min=1), batch_first=True, enforce_sorted=False)
        _, h = self.rnn(packed)  # h: (layers * directions, batch, hidden)
        if self.rnn.bidirectional:
            last = torch.cat([h[-2], h[-1]], dim=-1)
        else:
            last = h[-1]
        return self.proj(last)
