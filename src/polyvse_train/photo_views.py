"""Cached augmented views (``data.photo_views: V``): augmentation for a run on cached features.

A run that reads cached features (a frozen backbone's pooled vectors, or the map entering a fine-tuned tail,
``model.finetune_blocks``) sees every training photo exactly as evaluation does, in every epoch: no crop, no
flip, which the pixel path (``polyvse_train.pixels``) gets only by running the whole network every step. With
``photo_views: V`` the feature cache also holds V - 1 augmented views of each TRAINING photo
(``polyvse.features.augment``: random-resized crops, flipped half the time, fixed per photo and view), computed
once like any feature, and each step reads one of the V (view 0: the photo as evaluation sees it) for each photo
of its batch, drawn from (seed, epoch, batch, photo), so a resumed run reads what an uninterrupted one would, and
the ranks of a distributed run what one process would.
Evaluation photos get no views: they are read as they are, outside training steps too.

The objectives read ``data.features[rows]`` as always; the training loop stages each batch's rows before its
step (:meth:`PhotoViews.feed`, as the pixel path stages its crops).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch

__all__ = ["PhotoViews", "staged_rows"]


class PhotoViews:
    """``data.features`` of a run with augmented views: ``base`` ``(n, dim)`` float32, every photo as evaluation
    reads it, and ``views`` ``(V - 1, m, dim)`` (stored as float16: half the memory, well inside what the views'
    own randomness changes) for the ``m`` photos ``view_rows`` (the training photos)."""

    def __init__(self, base: torch.Tensor, views: torch.Tensor, view_rows: np.ndarray, seed: int):
        if views.ndim != 3 or views.shape[1] != len(view_rows) or views.shape[2] != base.shape[1]:
            raise ValueError(
                f"views {tuple(views.shape)} do not fit {len(view_rows)} photos of {base.shape[1]} features"
            )
        self.base, self.views = base, views.to(torch.float16)
        self.slot = np.full(len(base), -1, dtype=np.int64)  # photo row -> its row in views; -1: no views
        self.slot[np.asarray(view_rows, dtype=np.int64)] = np.arange(len(view_rows))
        self.seed = int(seed) % 2**32
        self._staged: torch.Tensor | None = None
        self._rows: list[int] = []

    @property
    def n_views(self) -> int:
        """V: the photo itself and its augmented views."""
        return 1 + int(self.views.shape[0])

    @property
    def shape(self) -> torch.Size:
        return self.base.shape

    def __len__(self) -> int:
        return len(self.base)

    def to(self, device: torch.device) -> PhotoViews:
        self.base, self.views = self.base.to(device), self.views.to(device)
        return self

    def draw(self, rows: Sequence[int], epoch: int, batch: int) -> np.ndarray:
        """The view (0 .. V - 1) that batch ``batch`` of epoch ``epoch`` reads for each of ``rows``; photos without
        views read view 0. One draw for every photo, then the rows': a photo's view does not depend on which
        other photos it is staged with, so the ranks of a distributed run read what one process would."""
        rng = np.random.default_rng([self.seed, int(epoch), int(batch)])
        rows = np.asarray(rows, dtype=np.int64)
        view = rng.integers(0, self.n_views, size=len(self.base))[rows]
        view[self.slot[rows] < 0] = 0
        return view

    def features(self, rows: Sequence[int], view: np.ndarray) -> torch.Tensor:
        """Photo ``rows`` as views ``view`` (one each), float32."""
        rows = np.asarray(rows, dtype=np.int64)
        out = self.base[torch.as_tensor(rows, device=self.base.device)]  # a gather: a copy of its own
        aug = np.flatnonzero(view > 0)
        if len(aug):
            slots = self.slot[rows[aug]]
            which = torch.as_tensor(view[aug] - 1, device=self.base.device)
            out[torch.as_tensor(aug, device=self.base.device)] = self.views[
                which, torch.as_tensor(slots, device=self.base.device)
            ].float()
        return out

    def feed(self, batch_rows: Sequence[np.ndarray], epoch: int, first: int) -> Iterator[None]:
        """Stage the photos of an epoch's batches ``first, first + 1, ...`` (``batch_rows``: the photo rows each
        reads), one batch per ``next``."""
        try:
            for i, rows in enumerate(batch_rows):
                distinct = list(dict.fromkeys(int(r) for r in rows))
                self._rows = distinct
                self._staged = self.features(distinct, self.draw(distinct, epoch, first + i))
                yield
        finally:
            self._staged, self._rows = None, []

    def __getitem__(self, rows) -> torch.Tensor:
        """Inside a training step the staged views of photo ``rows`` (in that order); outside one (evaluation)
        the photos as they are."""
        if self._staged is None:
            return self.base[rows]
        return staged_rows(self._staged, self._rows, rows, "staged")


def staged_rows(staged: torch.Tensor, staged_rows_: list[int], rows, how: str) -> torch.Tensor:
    """The rows of a staged batch (``staged``, one per photo row of ``staged_rows_``) for photo ``rows``, in
    their order: the batch itself when the objective reads it as staged (no gather)."""
    rows = [int(r) for r in rows]
    if rows == staged_rows_:
        return staged
    position = {r: i for i, r in enumerate(staged_rows_)}
    missing = [r for r in rows if r not in position]
    if missing:
        raise RuntimeError(
            f"photo rows {missing[:5]} were not {how} for this step: the objective's "
            "photo_rows must name every photo its batch reads"
        )
    return staged[torch.tensor([position[r] for r in rows]).to(staged.device, non_blocking=True)]
