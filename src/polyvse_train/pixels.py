"""The pixel path (``model.finetune_backbone``): a run whose whole image backbone trains reads its photos, decoded
and augmented afresh for every step, instead of cached features.

Before each step the photos of its batch have been decoded ahead in DataLoader workers (on a GPU as many as
``polyvse.device.loader_workers`` gives, into pinned memory, copied to the device without blocking; on the CPU in
the training process, whose network already takes every core), each one cropped at random (``data.crop_scale_min``
to all of its area, aspect 3/4 to 4/3, after the backbone's own resize), resized to the backbone's input, flipped
half the time (:class:`TrainCrop`), handed over as uint8 and normalised as the backbone's preprocessing normalises
where the batch lands; a batch's photos are shared among the workers in chunks (PHOTOS_PER_ITEM). The draws depend
only on (seed, epoch, batch, chunk), so a resumed run sees the crops an uninterrupted one would, whatever the workers.
With ``data.resident_photos`` the photos are decoded and resized once, kept as uint8 on the run's device, and
each step's crops are cut and resized there (:class:`ResidentPhotos`): the same draws from the same generators, so
the same crop boxes and mirrors, resized by torch instead of PIL (values within a few levels of PIL's); a GPU then
waits for no decoding (on an H100 machine 15 workers decoding every step held the loop to ~913 photos/s).
The objectives read the staged photos as they read cached features (``data.features[rows]``, :class:`PhotoPixels`).
Evaluation, like every later use of the checkpoint, embeds photos through the trained backbone at the backbone's
evaluation preprocessing (``polyvse.features.whole``).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from torch.utils.data import DataLoader, Dataset

from polyvse.device import pin_memory, to_device
from polyvse.errors import DataError
from polyvse.features.augment import random_view, view_draw
from polyvse.features.extractor import FeatureExtractor, Preprocess
from polyvse.features.images import load_image

from .photo_views import staged_rows

log = logging.getLogger("polyvse.train")


@dataclass(frozen=True)
class TrainCrop:
    """A photo -> one random training crop, uint8 (picklable: it runs in the DataLoader workers)."""

    preprocess: Preprocess  # the backbone's evaluation preprocessing: its resize, crop size and normalisation
    scale_min: float  # a crop covers this fraction of the resized photo's area or more

    def __call__(self, img: Image.Image, rng: np.random.Generator) -> torch.Tensor:
        """One random crop, ``(3, c, c)`` uint8: normalised where the batch lands
        (``Preprocess.normalised_batch``), so the workers hand over and pin a quarter of float32's bytes."""
        img = random_view(img, self.preprocess, self.scale_min, rng)
        return torch.from_numpy(np.ascontiguousarray(np.asarray(img).transpose(2, 0, 1)))

    def describe(self) -> str:
        return f"rrc{self.scale_min:g}.flip"


#: photos one worker decodes per item: a batch's photos are shared among every worker, however few batches an
#: epoch has (one item per batch left 9 of 15 workers idle on 6-batch epochs: 486 photos/s on an H100 machine,
#: benchmarks/results/gpu_finetune_h100_before.json)
PHOTOS_PER_ITEM = 32


def _batch_chunks(batch_rows: Sequence[np.ndarray]) -> list[tuple[int, int, list[int]]]:
    """(batch i, chunk j, the chunk's rows) of each batch's distinct photos (in order of first appearance: one a
    batch names twice is cropped once), in chunks of PHOTOS_PER_ITEM: chunk j of batch i draws its crops from a
    generator seeded by (seed, epoch, first + i, j) on both paths."""
    items = []
    for i, rows in enumerate(batch_rows):
        distinct = list(dict.fromkeys(int(r) for r in rows))
        for j in range(0, len(distinct), PHOTOS_PER_ITEM):
            items.append((i, j // PHOTOS_PER_ITEM, distinct[j : j + PHOTOS_PER_ITEM]))
    return items


class _BatchPhotos(Dataset):
    """Item k: (batch i, its chunk j, the chunk's crops ``(m, 3, c, c)`` uint8) of an epoch's batches ``first, ...``;
    a batch's distinct photos (in order of first appearance: one a batch names twice is decoded and cropped once)
    split into chunks of PHOTOS_PER_ITEM, each cropped with its own generator seeded by (seed, epoch, batch, chunk),
    so the crops do not depend on the workers or on where a resumed feed starts."""

    def __init__(
        self, paths: Sequence[str], batch_rows: Sequence[np.ndarray], first: int, seed: int, epoch: int, crop: TrainCrop
    ):
        self.paths, self.first, self.crop = paths, first, crop
        self.seed, self.epoch = seed % 2**32, epoch
        self.items = _batch_chunks(batch_rows)

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, k: int) -> tuple[int, torch.Tensor]:
        i, j, rows = self.items[k]
        rng = np.random.default_rng([self.seed, self.epoch, self.first + i, j])
        return i, torch.stack([self.crop(load_image(self.paths[r]), rng) for r in rows])


class PhotoPixels:
    """``data.features`` of the pixel path: the run's photos (one path per row), staged batch by batch."""

    def __init__(
        self,
        paths: Sequence[str],
        crop: TrainCrop,
        seed: int,
        workers: int,
        key: str,
        cache_dir: Path,
        resident: bool = False,
    ):
        self.paths, self.crop, self.seed, self.workers, self.key = list(paths), crop, seed, workers, key
        self.cache_dir = cache_dir  # the feature cache that features_of goes through
        self.device = torch.device("cpu")
        self._staged: torch.Tensor | None = None
        self._rows: list[int] = []  # the staged photos' rows, in their order
        # data.resident_photos: every photo decoded and resized once, uint8 on the device (ResidentPhotos)
        self.resident = ResidentPhotos(self.paths, crop, workers) if resident else None

    def __len__(self) -> int:
        return len(self.paths)

    def to(self, device: torch.device) -> PhotoPixels:
        self.device = device
        return self

    def feed(self, batch_rows: Sequence[np.ndarray], epoch: int, first: int) -> Iterator[None]:
        """Stage the photos of an epoch's batches ``first, first + 1, ...`` (``batch_rows``: the photo rows each
        reads), one batch per ``next``; the workers decode the following ones meanwhile (with resident photos: the
        crops are cut on the device when their batch comes)."""
        if self.resident is not None:
            try:
                for i, rows in enumerate(batch_rows):
                    self._rows, crops = self.resident.crops(rows, self.device, (self.seed, epoch, first + i))
                    self._staged = self.crop.preprocess.normalised_batch(crops)
                    yield
            finally:
                self._staged, self._rows = None, []
            return
        photos = _BatchPhotos(self.paths, batch_rows, first, self.seed, epoch, self.crop)
        loader = DataLoader(
            photos,
            batch_size=None,
            num_workers=self.workers,
            pin_memory=pin_memory(self.device),
            generator=torch.Generator(),
        )  # its own: the global RNG (dropout) is left alone
        chunks: list[torch.Tensor] = []
        try:
            for k, (i, crops) in enumerate(loader):
                chunks.append(to_device(crops, self.device))  # pinned: the copy overlaps the next chunk's wait
                if k + 1 < len(photos) and photos.items[k + 1][0] == i:
                    continue
                self._rows = [r for _, _, rows in photos.items[k + 1 - len(chunks) : k + 1] for r in rows]
                self._staged, chunks = self.crop.preprocess.normalised_batch(torch.cat(chunks)), []
                yield
        finally:
            self._staged, self._rows = None, []

    def __getitem__(self, rows) -> torch.Tensor:
        """The staged crops of photo ``rows`` (in that order)."""
        if self._staged is None:
            raise RuntimeError(
                "the pixel path stages photos for training steps only (PhotoPixels.feed); "
                "evaluation embeds them through the trained backbone (features_of)"
            )
        return staged_rows(self._staged, self._rows, rows, "decoded")

    def features_of(self, extractor: FeatureExtractor, rows: np.ndarray) -> np.ndarray:
        """The features of photo ``rows`` by ``extractor`` (the trained backbone's), through the feature cache."""
        from polyvse.features.cache import extract_features

        return extract_features(
            [self.paths[r] for r in rows],
            extractor,
            self.cache_dir,
            strict=True,
            num_workers=self.workers,
            progress=False,
        ).features


class _Resized(Dataset):
    """Item i: photo i resized as the backbone's preprocessing resizes it, ``(3, H, W)`` uint8."""

    def __init__(self, paths: Sequence[str], preprocess: Preprocess):
        self.paths, self.preprocess = paths, preprocess

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int) -> torch.Tensor:
        arr = np.asarray(self.preprocess.resized(load_image(self.paths[i])))
        return torch.from_numpy(np.ascontiguousarray(arr.transpose(2, 0, 1)))


class ResidentPhotos:
    """The pixel path's photos decoded and resized once (``data.resident_photos``), kept as uint8 where the run
    computes (``N x 3 x R x R`` bytes: ~1.8 GB for f8k-full's 6,850 photos at Lite2's 297), and each step's crops
    cut there: the crop boxes and mirrors drawn as :class:`TrainCrop` draws them (``view_draw``, chunk by chunk
    from the same generators), each crop resized by ``F.interpolate`` with antialiasing (PIL's kind of filter; the
    values land within a few levels of PIL's) and rounded to uint8 as the workers' crops are."""

    def __init__(self, paths: Sequence[str], crop: TrainCrop, workers: int):
        mode = crop.preprocess.interpolation
        if mode not in ("bilinear", "bicubic"):
            raise DataError(
                f"data.resident_photos resizes crops with torch's antialiased bilinear or bicubic "
                f"filter; this backbone resizes with {mode!r}: set data.resident_photos to false"
            )
        self.paths, self.crop, self.workers, self.mode = paths, crop, workers, mode
        self.photos: list[torch.Tensor] | None = None
        self.loaded_on: torch.device | None = None  # as asked: a tensor on "cuda" reports "cuda:0"

    def load(self, device: torch.device) -> None:
        """Decode and resize every photo once (in the DataLoader workers) onto ``device``."""
        if self.photos is not None and self.loaded_on == device:
            return
        start = time.perf_counter()
        loader = DataLoader(_Resized(self.paths, self.crop.preprocess), batch_size=None, num_workers=self.workers)
        self.photos, self.loaded_on = [to_device(photo, device) for photo in loader], device
        size = sum(p.numel() for p in self.photos)
        log.info(
            "resident photos: %d decoded and resized once onto %s (%.2f GB) in %.1f s",
            len(self.photos),
            device,
            size / 1e9,
            time.perf_counter() - start,
        )

    def crops(
        self, rows: np.ndarray, device: torch.device, seed: tuple[int, int, int]
    ) -> tuple[list[int], torch.Tensor]:
        """(the batch's distinct photo rows in staging order, their crops ``(m, 3, c, c)`` uint8 on ``device``)
        for the batch numbered ``seed[2]`` of epoch ``seed[1]``: chunk j draws from (run seed, epoch, batch, j)."""
        self.load(device)
        run_seed, epoch, batch = seed
        c, out, order = self.crop.preprocess.crop, [], []
        for _, j, chunk in _batch_chunks([rows]):
            rng = np.random.default_rng([run_seed % 2**32, epoch, batch, j])
            for r in chunk:
                photo = self.photos[r]
                (top, left, h, w), flip = view_draw(rng, photo.shape[1], photo.shape[2], self.crop.scale_min)
                x = F.interpolate(
                    photo[None, :, top : top + h, left : left + w].float(),
                    size=(c, c),
                    mode=self.mode,
                    align_corners=False,
                    antialias=True,
                )
                out.append(x.flip(-1) if flip else x)
                order.append(r)
        return order, torch.cat(out).round_().clamp_(0, 255).to(torch.uint8)


class FixedPhotoBatch:
    """Pads every training batch entering the whole backbone to ``size`` photos (zeros) and drops the padding's
    outputs, so that its convolutions see one batch shape. The distinct-photo sampler ends each epoch with batches
    whose sizes depend on (seed, epoch) (f8k-full at 256: 201 and 3 in epoch 1, 200 and 4 in epoch 3, ...), and
    on a GPU every epoch that brought a size not seen before took 10-20 s longer (configs/gpu/README.md, "Irregular
    epochs"). Exact: the backbone's BatchNorm is folded into its convolutions, so a photo's output does not depend
    on the other photos of its batch, and the padding's outputs, dropped, send no gradient back. Evaluation mode
    is left alone (the extractor embeds photos in its own batches)."""

    def __init__(self, tail: torch.nn.Module, size: int):
        self.size, self.padded = size, 0
        self._n: list[int] = []
        self.handles = [tail.register_forward_pre_hook(self._pad), tail.register_forward_hook(self._cut)]

    def _pad(self, module, args):
        x = args[0]
        n = x.shape[0]
        if not module.training or x.dim() != 4 or n >= self.size:
            self._n.append(-1)
            return None
        self._n.append(n)
        self.padded += self.size - n
        return (torch.cat([x, x.new_zeros((self.size - n, *x.shape[1:]))]), *args[1:])

    def _cut(self, module, args, output):
        n = self._n.pop()
        return output if n < 0 else output[:n]

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


def pixel_key(extractor: FeatureExtractor, whole: str, crop: TrainCrop, resident: bool = False) -> str:
    """What identifies a pixel path's input (a run's training state records it): the whole backbone's name, the
    starting weights, the preprocessing and the augmentation (resident photos' crops are resized by torch)."""
    raw = f"{whole}.{extractor.weights_tag}.{extractor.preprocess.describe()}.{crop.describe()}"
    raw += ".resident" if resident else ""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", raw)


class _Decode(Dataset):
    def __init__(self, paths: Sequence[str]):
        self.paths = paths

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int) -> str | None:
        try:
            load_image(self.paths[i])
            return None
        except DataError as exc:
            return exc.reason


def readable_photos(paths: Sequence[str], workers: int) -> tuple[list[int], list[tuple[str, str]]]:
    """(positions of the photos that decode, (path, reason) of those that do not): every photo is decoded once
    before training, so none fails mid-run."""
    ok, failures = [], []
    loader = DataLoader(_Decode(paths), batch_size=None, num_workers=workers)
    for i, reason in enumerate(loader):
        if reason is None:
            ok.append(i)
        else:
            failures.append((str(paths[i]), reason))
            log.warning("skipping photo %s: %s", paths[i], reason)
    return ok, failures
