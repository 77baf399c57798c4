"""The banks of CSLS retrieval scoring (polyvse.csls.banks), built when a run with
``model.retrieval_scoring: csls`` finishes: from its TRAINING split only, so nothing an evaluation reads enters
them (the run's split is what excludes evaluation photos and their captions; checked again here)."""

from __future__ import annotations

import numpy as np

from polyvse.csls.banks import HubnessBanks
from polyvse.errors import DataError
from polyvse.model.torch_model import PolyvseModel

from .data import PreparedData
from .pixels import PhotoPixels

# photos embedded at a time: the fine-tuned backbone tail reads (C, h, w) maps, a few MB each
_PHOTO_BATCH = 256


def split_features(model: PolyvseModel, data: PreparedData, rows: np.ndarray):
    """The image features of photo ``rows`` as evaluation reads them (the pixel path's photos go through the
    trained backbone, as the checkpoint's photos will in polyvse.load)."""
    if isinstance(data.features, PhotoPixels):
        return data.features.features_of(model.extractor, rows)
    return data.features[rows]


def bank_captions(data: PreparedData) -> dict[str, list[int]]:
    """Per language, the training captions of the caption bank: the first one of each training photo, in the
    caption set's order (one per photo, so photos with more captions weigh no more)."""
    train_rows = set(int(r) for r in data.train_rows)
    first: dict[str, dict[int, int]] = {}
    for i, (row, lang) in enumerate(zip(data.train.photo_row, data.train.langs)):
        if int(row) not in train_rows:
            raise DataError(
                f"training caption {i} ({lang}) belongs to photo row {int(row)}, which is not a "
                "training photo; the run's split is inconsistent"
            )
        first.setdefault(lang, {}).setdefault(int(row), i)
    return {lang: list(by_row.values()) for lang, by_row in first.items()}


def training_banks(model: PolyvseModel, data: PreparedData, k: int, clip_k: bool = False) -> HubnessBanks:
    """CSLS banks of ``model``: the universal embeddings of every training photo and of the bank captions
    (:func:`bank_captions`) per language. ``clip_k`` (smoke runs, a slice of the photos): k at most the smallest
    bank's size instead of an error."""
    train_rows = np.asarray(data.train_rows, dtype=np.int64)
    shared = np.intersect1d(train_rows, np.asarray(data.eval_rows, dtype=np.int64))
    if shared.size:
        raise DataError(
            f"{shared.size} photos are in both the training and the evaluation split (e.g. row "
            f"{int(shared[0])}); CSLS banks must come from training photos only"
        )
    caps = bank_captions(data)
    if clip_k:
        k = max(1, min([k, len(train_rows)] + [len(ix) for ix in caps.values()]))
    small = {lang: len(ix) for lang, ix in caps.items() if len(ix) < k}
    if len(train_rows) < k or small:
        raise DataError(
            f"csls_k={k} needs at least {k} training photos ({len(train_rows)}) and captions of each "
            f"language ({small or 'enough'}); lower model.csls_k"
        )
    photos = np.concatenate(
        [
            model.encode_image_features(split_features(model, data, train_rows[i : i + _PHOTO_BATCH]))
            for i in range(0, len(train_rows), _PHOTO_BATCH)
        ]
    )
    captions = {lang: model.encode_ids([data.train.ids[i] for i in ix], lang) for lang, ix in caps.items()}
    return HubnessBanks(photos, captions, k)
