"""Data-parallel training over torch.distributed (DDP), launched by `torchrun`.

Negatives come from the global batch: every rank embeds its slice of the batch, the embeddings are gathered
*with gradients* (as open_clip's --gather-with-grad), and every rank computes the loss on the whole batch.
The all-gather backward sums each rank's gradient for the local slice (world_size x the true gradient) and DDP
averages over ranks, so the update equals the single-process update on the same global batch. The process group
itself (joining it, barriers, leaving) is the library's: ``polyvse.distributed``.
"""

from __future__ import annotations

import numpy as np
import torch

from polyvse.distributed import DistInfo


def shard(items, info: DistInfo):
    """This rank's contiguous slice of a global batch (sizes differ by at most one across ranks)."""
    return np.array_split(np.asarray(items), info.world_size)[info.rank]


def gather_with_grad(x: torch.Tensor, info: DistInfo, sizes: list[int]) -> torch.Tensor:
    """Concatenate every rank's rows in rank order, keeping gradients flowing back to their owners.

    all_gather needs equal shapes, so slices are padded to the largest and the padding removed afterwards.
    """
    if not info.enabled:
        return x
    from torch.distributed.nn.functional import all_gather

    longest = max(sizes)
    if x.shape[0] < longest:
        x = torch.cat([x, x.new_zeros((longest - x.shape[0], *x.shape[1:]))])
    parts = all_gather(x)
    return torch.cat([p[:n] for p, n in zip(parts, sizes)])
