"""Which shard of a photo collection this process handles, for `features extract` and `index build`.

Two ways to split a collection:

* under ``torchrun`` the rank is the shard and the world size the number of shards; the processes meet in a
  process group (gloo on CPU, NCCL on GPUs), so rank 0 can wait for the others and finish the job;
* ``--shard K/N`` runs one shard as an independent job (e.g. one per machine of a batch system, with no
  process group between them); a separate step finishes the job once all N have run.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from polyvse.distributed import DistInfo, all_gather_objects, barrier, init_distributed, shutdown
from polyvse.errors import DataError, PolyvseError
from polyvse.sharding import parse_shard_spec, shard_bounds

T = TypeVar("T")


@dataclass(frozen=True)
class ShardRole:
    shard: int = 0
    num_shards: int = 1
    independent: bool = False  # --shard K/N: no process group, nobody to wait for
    dist: DistInfo = field(default_factory=DistInfo)  # the torchrun process group (world size 1 otherwise)

    @property
    def sharded(self) -> bool:
        """True when the collection is split: under torchrun with several ranks, or with --shard."""
        return self.independent or self.num_shards > 1

    @property
    def is_main(self) -> bool:
        return self.shard == 0

    @property
    def label(self) -> str:
        return f"shard {self.shard}/{self.num_shards}"

    def bounds(self, total: int) -> tuple[int, int]:
        return shard_bounds(total, self.shard, self.num_shards)


def shard_role(spec: str | None, device=None) -> ShardRole:
    """The role from ``--shard K/N`` if given, else from torchrun's environment (one unsharded process without).

    ``device``: where this process computes (a CUDA device makes the torchrun group NCCL on that GPU)."""
    if spec is not None:
        if int(os.environ.get("WORLD_SIZE", "1")) > 1:
            raise DataError(
                "--shard K/N is for independent jobs; under torchrun every rank already takes its own "
                "shard (drop --shard)"
            )
        shard, num_shards = parse_shard_spec(spec)
        return ShardRole(shard, num_shards, independent=True)
    info = init_distributed(device)
    return ShardRole(info.rank, info.world_size, dist=info)


def run_with_shard_role(spec: str | None, command: Callable[[ShardRole], int], device=None) -> int:
    """A command's entry under --shard / torchrun: its role, then the process group shut down however it ends."""
    role = shard_role(spec, device)
    try:
        code = command(role)
        # leave together: a rank that tears its gloo group down while rank 0 still merges can abort (SIGABRT,
        # "terminate called without an active exception", seen once in CI); a rank that raised instead has
        # already torn its group down in `finally`, which fails this barrier on the others rather than hang it
        barrier(role.dist)
        return code
    finally:
        shutdown(role.dist)


def run_shard(role: ShardRole, work: Callable[[], T]) -> list[T]:
    """This process's ``work()``, then (under torchrun) every rank's result in shard order, on every rank.

    The ranks wait for each other here. A PolyvseError on one rank does not leave the others waiting: it is
    passed on, the failed rank raises its own error and rank 0 raises a DataError naming every failed shard.
    Without a process group this is ``[work()]``.
    """
    if not role.dist.enabled:
        return [work()]
    try:
        result, error = work(), None
    except PolyvseError as exc:
        result, error = None, exc
    outcomes = all_gather_objects({"result": result, "error": None if error is None else str(error)}, role.dist)
    if error is not None:
        raise error
    failed = [(k, o["error"]) for k, o in enumerate(outcomes) if o["error"] is not None]
    if failed and role.is_main:
        raise DataError(
            "; ".join(f"rank {k} of {role.num_shards} failed: {e}" for k, e in failed)
            + ". What the other ranks finished is kept: run the same command again to resume"
        )
    return [o["result"] for o in outcomes]
