"""CPU time of a zoo plan, measured before it runs: a few timed training steps of each config.

For each config the run is set up exactly as the zoo sets it up (data, vocabulary, model, objective; seed 0,
official split), then ``steps`` optimiser steps are timed in each stage of its schedule (the pre-epochs of
MULE's LP and the Translator's source stage, and the main epochs), and once the evaluation. CPU time of this
process, so what else the machine runs does not enter (one thread, as the zoo trains). The estimate of a run:

    setup + sum over stages (epochs x batches per epoch x seconds per step) + evaluation

The first step of a stage is timed apart (a stage's one-off work, e.g. the Translator's lexicon map) and counted
once per stage, not per step.
"""

from __future__ import annotations

import resource
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .spec import ZooRun, ZooSpec, effective_config


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


@dataclass
class StageTiming:
    epochs: int
    batches_per_epoch: int
    first_step_s: float  # the stage's first step, with its one-off work
    step_s: float  # per step after the first

    def seconds(self) -> float:
        return self.first_step_s + self.step_s * (self.epochs * self.batches_per_epoch - 1)


@dataclass
class RunEstimate:
    config: str
    setup_s: float
    eval_s: float
    stages: list[StageTiming] = field(default_factory=list)

    def seconds(self) -> float:
        return self.setup_s + self.eval_s + sum(s.seconds() for s in self.stages)

    def to_dict(self) -> dict:
        return {**asdict(self), "minutes": round(self.seconds() / 60, 1)}


def _time_stage(run, first_epoch: int, epochs: int, steps: int) -> StageTiming:
    """Time ``steps`` steps from the start of epoch ``first_epoch`` (the first one apart)."""
    from ..train import train_one_epoch

    run.epoch, run.batch_pos = first_epoch, 0
    n_batches = len(run.sampler.epoch_batches(first_epoch))
    c0 = _cpu()
    train_one_epoch(run, max_steps=run.step + 1)
    c1 = _cpu()
    n = max(1, min(steps, n_batches - 1))
    train_one_epoch(run, max_steps=run.step + n)
    return StageTiming(epochs, n_batches, round(c1 - c0, 3), round((_cpu() - c1) / n, 4))


def estimate_run(run: ZooRun, spec: ZooSpec, root: Path, steps: int = 20) -> RunEstimate:
    """Time one config of the plan (see the module docstring); nothing is written outside a temporary folder."""
    import torch

    from polyvse.distributed import DistInfo

    from ..train import finish_run, setup_run

    cfg = effective_config(run, spec)
    flat = cfg.to_dict()
    torch.set_num_threads(max(1, flat["threads"]))
    with tempfile.TemporaryDirectory(prefix="zoo-estimate-") as tmp:
        c0 = _cpu()
        tr = setup_run(
            cfg, Path(tmp), root, DistInfo(), smoke=False, progress=False, device=torch.device("cpu"), precision="fp32"
        )
        setup = _cpu() - c0
        pre = tr.objective.pre_epochs
        stages = [_time_stage(tr, 0, pre, steps)] if pre else []
        stages.append(_time_stage(tr, pre, flat["epochs"], steps))
        tr.epoch = tr.epochs
        c0 = _cpu()
        finish_run(tr)
        return RunEstimate(run.config, round(setup, 2), round(_cpu() - c0, 2), stages)


def estimate_plan(
    runs: list[ZooRun], spec: ZooSpec, root: Path, steps: int = 20, echo: Callable[[str], None] = print
) -> dict[str, RunEstimate]:
    """One estimate per config of the plan (its seed-0 official run stands for all its runs)."""
    out: dict[str, RunEstimate] = {}
    for run in runs:
        if run.config in out or run.tag:
            continue
        t = time.time()
        out[run.config] = est = estimate_run(run, spec, root, steps)
        echo(
            f"{run.config}: {est.seconds() / 60:.1f} CPU min per run (setup {est.setup_s:.0f} s, eval "
            f"{est.eval_s:.0f} s, "
            + ", ".join(f"{s.epochs} x {s.batches_per_epoch} steps x {s.step_s:.3f} s" for s in est.stages)
            + f"; measured in {time.time() - t:.0f} s)"
        )
    return out
