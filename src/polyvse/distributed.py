"""The process group of a command launched by `torchrun`: joining it, waiting, gathering, leaving.

Training (``polyvse_train``: DDP) and the sharded commands (``features extract``, ``index build``) use it; a
process started without torchrun is one rank of a world of one, and every helper here is then a no-op.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from .errors import DataError

#: minutes a collective (a barrier included) waits for every rank before the run fails. torch's default for NCCL,
#: 10, is shorter than rank 0 preparing data from empty caches while the others wait on a CPU.
DEFAULT_TIMEOUT_MIN = 60.0
#: environment variable that sets it for every command run under torchrun (train also takes --dist-timeout)
TIMEOUT_ENV = "POLYVSE_DIST_TIMEOUT"


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def init_distributed(device: torch.device | None = None, timeout_min: float | None = None) -> DistInfo:
    """Join the process group when launched by torchrun (WORLD_SIZE > 1); a no-op otherwise.

    ``device`` is where this rank computes (``polyvse.device.resolve_device``, which gives each rank
    ``cuda:$LOCAL_RANK``): a CUDA device is made the rank's current device and the group uses NCCL; CPU uses gloo.
    ``timeout_min``: how long a collective waits for the other ranks (default: $POLYVSE_DIST_TIMEOUT, else 60).
    """
    timeout = timedelta(minutes=process_group_timeout_min(timeout_min))  # checked with or without torchrun
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistInfo()
    device = device or torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)  # NCCL collectives run on the current device: this rank's own GPU
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo", timeout=timeout)
    return DistInfo(
        rank=dist.get_rank(), world_size=dist.get_world_size(), local_rank=int(os.environ.get("LOCAL_RANK", "0"))
    )


def process_group_timeout_min(given: float | None = None) -> float:
    """``given``, else $POLYVSE_DIST_TIMEOUT, else DEFAULT_TIMEOUT_MIN; a positive number of minutes."""
    where, value = "--dist-timeout", given
    if value is None:
        where, value = f"${TIMEOUT_ENV}", os.environ.get(TIMEOUT_ENV) or DEFAULT_TIMEOUT_MIN
    try:
        minutes = float(value)
    except ValueError:
        minutes = float("nan")
    if not minutes > 0:
        raise DataError(
            f"{where} {value!r}: give the minutes a rank waits for the others, a positive number "
            f"(default {DEFAULT_TIMEOUT_MIN:g})"
        )
    return minutes


def barrier(info: DistInfo) -> None:
    if info.enabled:
        dist.barrier()


def shutdown(info: DistInfo) -> None:
    if info.enabled and dist.is_initialized():
        dist.destroy_process_group()


def all_gather_objects(obj, info: DistInfo) -> list:
    """Every rank's picklable ``obj`` in rank order (also a barrier); ``[obj]`` without a process group."""
    if not info.enabled:
        return [obj]
    out = [None] * info.world_size
    dist.all_gather_object(out, obj)
    return out
