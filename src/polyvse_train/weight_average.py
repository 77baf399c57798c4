"""An exponential moving average of the model's weights (Polyak averaging), kept beside the training loop.

``schedule.ema_decay`` d > 0: after every optimisation step each floating-point parameter and buffer (a batch
norm's running statistics included) moves towards the model's, ``avg = d * avg + (1 - d) * w`` (the update is
torch's own, ``torch.optim.swa_utils.get_ema_multi_avg_fn``); at the end the checkpoint holds the average instead
of the last weights. Unlike ``AveragedModel`` it keeps tensors, not a deep copy of the module, so a model holding
open files (the e5 tail's weights file) needs no copying, and the average is a plain state dict for the training
state.
"""

from __future__ import annotations

from collections import defaultdict

import torch
from torch.optim.swa_utils import get_ema_multi_avg_fn


class WeightAverage:
    """The moving average of ``model``'s floating-point parameters and buffers, starting from their values now."""

    def __init__(self, model: torch.nn.Module, decay: float):
        if not 0.0 < decay < 1.0:
            raise ValueError(f"ema decay must be in (0, 1), got {decay}")
        self._update = get_ema_multi_avg_fn(decay)
        self.average = {name: t.detach().clone() for name, t in self._tensors(model)}

    @staticmethod
    def _tensors(model: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
        named = list(model.named_parameters()) + list(model.named_buffers())
        return [(name, t) for name, t in named if t.is_floating_point()]

    @torch.no_grad()
    def update(self, model: torch.nn.Module) -> None:
        # foreach kernels take one dtype and device per call (a float16 buffer beside float32 weights)
        groups: dict[tuple, tuple[list, list]] = defaultdict(lambda: ([], []))
        for name, t in self._tensors(model):
            avg = self.average[name]
            group = groups[(avg.dtype, avg.device)]
            group[0].append(avg)
            group[1].append(t.detach())
        for averages, current in groups.values():
            self._update(averages, current, None)

    @torch.no_grad()
    def copy_to(self, model: torch.nn.Module) -> None:
        """Put the averaged weights into ``model`` (its integer buffers, e.g. batch counts, stay as they are)."""
        for name, t in self._tensors(model):
            t.copy_(self.average[name])

    def state_dict(self) -> dict[str, torch.Tensor]:
        return dict(self.average)

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        missing = set(self.average) ^ set(state)
        if missing:
            raise KeyError(f"the saved weight average does not match the model: {sorted(missing)[:5]}")
        for name, t in state.items():
            self.average[name].copy_(t)
