"""The torch side of a subword student (``polyvse.model.subwords``): a new language's Linear part plus a
learned bag of hashed words and character n-grams, added before the shared head."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from .subwords import TABLE, UP, SubwordSpec, bag_inputs, subword_ids

__all__ = ["SubwordStudent"]


class SubwordStudent(nn.Module):
    """``linear(x) + up(mean of table rows of the sentence's n-grams)``. The table starts at zero, so an untrained
    student is its Linear part (the zero-shot fallback it was initialised from); the table learns through sparse
    gradients (only the rows a batch touches)."""

    def __init__(self, linear: nn.Linear, spec: SubwordSpec, seed: int = 0, dropout: float = 0.0):
        super().__init__()
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"subword dropout {dropout}: a probability in [0, 1)")
        self.spec = spec
        self.dropout = float(dropout)  # training only: each bag row left out with this probability
        self.drop_rng = np.random.default_rng(seed)  # the teacher reseeds it every epoch (exact resume)
        self._known: dict | None = None  # remember()'s hashed sentences
        self.linear = linear
        self.table = nn.EmbeddingBag(spec.buckets, spec.dim, mode="mean", sparse=True)
        nn.init.zeros_(self.table.weight)
        self.up = nn.Linear(spec.dim, linear.out_features, bias=False)
        with torch.no_grad():  # small and seeded: the zero table makes the start exactly the Linear part
            self.up.weight.copy_(
                torch.randn(self.up.weight.shape, generator=torch.Generator().manual_seed(seed)) * 0.02
            )

    def forward(self, vecs: torch.Tensor, texts: Sequence[str]) -> torch.Tensor:
        if len(texts) != len(vecs):
            raise ValueError(f"{len(vecs)} tower vectors but {len(texts)} sentences")
        flat, offsets = bag_inputs(texts, self.spec, self._known)
        if self.training and self.dropout and len(flat):
            flat, offsets = _drop_rows(flat, offsets, self.dropout, self.drop_rng)
        device = self.table.weight.device
        bag = self.table(torch.from_numpy(flat).to(device), torch.from_numpy(offsets).to(device))
        return self.linear(vecs) + self.up(bag)

    def remember(self, texts: Sequence[str]) -> None:
        """Hash ``texts`` once for the epochs to come (training); ``forget`` drops them (a served student keeps
        no per-sentence memory)."""
        self._known = {t: np.asarray(subword_ids(t, self.spec), dtype=np.int64) for t in texts}

    def forget(self) -> None:
        self._known = None

    def dense_parameters(self) -> list[nn.Parameter]:
        return list(self.linear.parameters()) + list(self.up.parameters())

    def extras(self) -> dict[str, torch.Tensor]:
        """The tensors stored beside the Linear part, by their names under the part's prefix."""
        return {TABLE: self.table.weight.detach().cpu().contiguous(), UP: self.up.weight.detach().cpu().contiguous()}

    @classmethod
    def from_tensors(
        cls, linear: nn.Linear, spec: SubwordSpec, table: torch.Tensor, up: torch.Tensor
    ) -> SubwordStudent:
        student = cls(linear, spec)
        with torch.no_grad():
            student.table.weight.copy_(table)
            student.up.weight.copy_(up)
        return student.eval()


def _drop_rows(
    flat: np.ndarray, offsets: np.ndarray, p: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """``bag_inputs``' (flat, offsets) with each row kept with probability ``1 - p``: the mean then runs over what
    is left (a sentence that loses every row has an empty bag, a zero subword term)."""
    keep = rng.random(len(flat)) >= p
    sentence = np.searchsorted(offsets, np.arange(len(flat)), side="right") - 1
    counts = np.bincount(sentence[keep], minlength=len(offsets))
    return flat[keep], np.concatenate([[0], np.cumsum(counts[:-1])]).astype(np.int64)
