"""Adaptation's lines through a trained e5 tail: batched by length (each batch padded to its longest row), out in
the rows' own order, each vector what the row gives alone."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from polyvse.adaptation.line_vectors import _through_tail
from polyvse.modules.pretrained.e5.tail import pad_states


class _Reader:
    def pad(self, rows):
        return pad_states([states for states, _ in rows], 4)


class _Encoder(nn.Module):
    """A tail whose output depends on the padding unless the lengths mask it: sum of the valid tokens, then tanh."""

    def __init__(self):
        super().__init__()
        self.tail = nn.Linear(4, 4)
        self.widths: list[int] = []

    def sentence_vectors(self, x, lengths):
        self.widths.append(x.shape[1])
        mask = torch.arange(x.shape[1])[None, :] < lengths[:, None]
        return torch.tanh(self.tail((x * mask[..., None]).sum(1)) / lengths[:, None])


def test_rows_go_through_by_length_and_come_back_in_order():
    rng = np.random.default_rng(0)
    lengths = [int(n) for n in rng.integers(1, 40, size=37)]
    rows = [(rng.normal(size=(n, 4)).astype(np.float32), None) for n in lengths]
    enc = _Encoder()
    got = _through_tail(_Reader(), enc, rows, batch_size=8)
    assert enc.widths == sorted(enc.widths)  # padded to the batch's longest row, shortest batches first
    assert sum(enc.widths) < sum(max(lengths[i : i + 8]) for i in range(0, 37, 8))  # less padding than in order
    enc_alone = _Encoder()
    enc_alone.load_state_dict(enc.state_dict())
    alone = np.concatenate([_through_tail(_Reader(), enc_alone, [r], 1) for r in rows])
    np.testing.assert_allclose(got, alone, rtol=1e-5, atol=1e-6)
    assert got.dtype == np.float32 and enc.training  # the encoder's mode is given back
