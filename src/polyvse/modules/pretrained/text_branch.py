"""The text branch of a model whose text side is a frozen pretrained sentence encoder.

    frozen sentence vector (pretrained_dim, computed outside the graph, see ``PretrainedCaptionEncoder``)
        -> [MULE: per-language Linear(pretrained_dim -> universal_dim), the "universal embedding"]
        -> learned head (``FrozenSentenceEncoderHead``: linear, or Linear-ReLU-Dropout-Linear)
        -> joint space

It has the interface of :class:`polyvse.modules.text_encoder.TextEncoder`, so the training objectives and
``PolyvseModel`` use it unchanged: the "ids" it reads are the padded sentence vectors ``(batch, 1, dim)``
that ``PretrainedCaptionEncoder.pad`` builds, ``lengths`` are all 1, and ``features`` returns the head's
input as the one "word" of the sentence -- so MULE's neighbourhood constraints and language classifier, which
read the mean of the word features, act on the universal projection (or, without one, on the frozen vector).

With a trainable e5 tail (``tail_layers`` k > 0) the input is (batch, T, 384 + other towers) per-token hidden states
entering e5's last k layers (``PretrainedCaptionEncoder.pad``): the tail (:class:`.e5.tail.TextTail`, e5's own
weights to start with) turns them into e5's sentence vector, which takes the place of the frozen one.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from .head import FrozenSentenceEncoderHead

__all__ = ["PretrainedTextEncoder", "TEXT_HEADS"]

TEXT_HEADS = ("linear", "mlp")


class PretrainedTextEncoder(nn.Module):
    """Learned parts on top of frozen sentence vectors; see the module docstring."""

    def __init__(
        self,
        in_dim: int,
        embed_dim: int,
        head: str = "linear",
        hidden_dim: int = 1024,
        dropout: float = 0.0,
        languages: Sequence[str] = (),
        universal_dim: int = 0,
        towers: Sequence[int] = (),
        tower_dropout: float = 0.0,
        tail_layers: int = 0,
    ):
        super().__init__()
        self.towers = [int(d) for d in towers] if len(towers) > 1 else []
        if self.towers and sum(self.towers) != in_dim:
            raise ValueError(f"tower sizes {self.towers} do not add up to the input size {in_dim}")
        if not 0.0 <= tower_dropout < 1.0:
            raise ValueError(f"tower_dropout must be in [0, 1), got {tower_dropout}")
        self.tower_dropout = float(tower_dropout) if self.towers else 0.0
        if head not in TEXT_HEADS:
            raise ValueError(f"unknown text_head {head!r}; available: {', '.join(TEXT_HEADS)}")
        if in_dim < 1:
            raise ValueError(f"pretrained_dim must be positive (the sentence encoder's size), got {in_dim}")
        self.languages = list(languages)
        self.universal_dim = int(universal_dim)
        if self.universal_dim and not self.languages:
            raise ValueError("per-language text parts need the list of languages")
        self.in_dim = int(in_dim)
        if self.universal_dim:
            self.universal = nn.ModuleDict({lang: nn.Linear(in_dim, self.universal_dim) for lang in self.languages})
        self.head = FrozenSentenceEncoderHead(
            self.universal_dim or in_dim, embed_dim, hidden=hidden_dim if head == "mlp" else None, dropout=dropout
        )
        # created last, so models without a tail keep their initialisation (and numbers)
        self.tail = None
        if tail_layers:
            from .e5.tail import TextTail

            self.tail = TextTail.from_file(int(tail_layers))

    @property
    def needs_language(self) -> bool:
        return bool(self.universal_dim)

    def features(
        self, vecs: torch.Tensor, lengths: torch.Tensor | None = None, langs: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(sentence embeddings (batch, embed_dim), the head's input as one "word" (batch, 1, d))."""
        x = self.sentence_vectors(vecs, lengths)
        if self.training and self.tower_dropout:
            x = self._drop_towers(x)
        if self.universal_dim:
            if langs is None:
                raise ValueError(
                    "this text branch has per-language parts: pass langs, the (batch,) language "
                    f"indices into {self.languages}"
                )
            langs = torch.as_tensor(langs, dtype=torch.long)
            parts = [(li, (langs == li).nonzero(as_tuple=True)[0]) for li in torch.unique(langs).tolist()]
            projected = [self.universal[self.languages[li]](x[rows]) for li, rows in parts]
            # the projections' dtype, not x's: under bf16 autocast a linear layer returns bf16 from fp32 input
            out = projected[0].new_zeros((x.shape[0], self.universal_dim))
            for (_, rows), y in zip(parts, projected):
                out = out.index_copy(0, rows, y)
            x = out
        return self.head(x), x[:, None, :]

    def sentence_vectors(self, vecs: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        """The towers' sentence vectors (batch, in_dim) of a padded input: the vectors themselves, or, with an e5
        tail, e5's from the per-token states (``lengths``: their token counts; None reads them off the padding).
        A 2-D input is taken as those sentence vectors already (the tail's output where there is one)."""
        if not torch.is_floating_point(vecs):
            raise ValueError(
                "a pretrained text branch reads sentence vectors (float), not word ids: encode the "
                "captions with the checkpoint's PretrainedCaptionEncoder"
            )
        if vecs.dim() == 2:  # (batch, in_dim): the towers' sentence vectors already, past any tail (adaptation's)
            if vecs.shape[1] != self.in_dim:
                raise ValueError(f"sentence vectors of size {vecs.shape[1]}, this text branch reads {self.in_dim}")
            return vecs.float()
        if self.tail is not None:
            return self._through_tail(vecs, lengths)
        if vecs.dim() == 3:
            if vecs.shape[1] != 1:
                raise ValueError(f"expected one sentence vector per caption, got shape {tuple(vecs.shape)}")
            vecs = vecs[:, 0]
        return vecs.float()

    def _through_tail(self, x: torch.Tensor, lengths: torch.Tensor | None) -> torch.Tensor:
        h = self.tail.shape.hidden
        if x.dim() != 3 or x.shape[2] != self.in_dim:
            raise ValueError(
                f"a text branch with an e5 tail reads per-token states (batch, T, {self.in_dim}), "
                f"got {tuple(x.shape)}: encode with the checkpoint's PretrainedCaptionEncoder"
            )
        states = x[..., :h].float()
        if lengths is None:  # a real token's state is never all zeros (LayerNorm): padding is
            lengths = (states.abs().sum(-1) > 0).sum(1)
        return torch.cat([self.tail(states, lengths), x[:, 0, h:].float()], dim=1)

    def _drop_towers(self, x: torch.Tensor) -> torch.Tensor:
        """Zero each tower's slice of a row with probability tower_dropout, keeping at least one present tower
        (a slice of zeros is a tower that lacks the caption's language)."""
        slices = torch.split(x, self.towers, dim=1)
        present = torch.stack([s.abs().sum(1) > 0 for s in slices], dim=1)  # (batch, towers)
        keep = present & (torch.rand(present.shape, device=x.device) >= self.tower_dropout)
        none_left = ~keep.any(dim=1, keepdim=True)
        keep = torch.where(none_left, present, keep)
        return torch.cat([s * keep[:, i : i + 1] for i, s in enumerate(slices)], dim=1)

    def forward(
        self, vecs: torch.Tensor, lengths: torch.Tensor | None = None, langs: torch.Tensor | None = None
    ) -> torch.Tensor:
        return self.features(vecs, lengths, langs)[0]
