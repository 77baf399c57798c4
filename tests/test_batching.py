"""polyvse.util.batching: batches shortest first, each row's output back in its own place."""

from __future__ import annotations

import numpy as np

from polyvse.util.batching import in_length_batches


def test_rows_go_shortest_first_and_come_back_in_order():
    lengths = [5, 1, 9, 3, 7]
    seen = []

    def encode(take):
        seen.append([lengths[i] for i in take])
        return np.array([[lengths[i], i] for i in take], dtype=np.float32)

    out = in_length_batches(lengths, 5, 2, encode)
    assert seen == [[1, 3], [5, 7], [9]]
    assert out.tolist() == [[5, 0], [1, 1], [9, 2], [3, 3], [7, 4]] and out.dtype == np.float32
    seen.clear()
    in_length_batches(None, 5, 2, encode)  # no lengths: in order
    assert seen == [[5, 1], [9, 3], [7]]
    assert in_length_batches(None, 0, 2, encode) is None
