"""Batch samplers. Every sampler's batches depend only on (seed, epoch), so a resumed run is exact.

    DistinctPhotoBatchSampler     captions of distinct photos, languages mixed (objective vse)
    PhotoTupleBatchSampler        distinct photos with ``quotas[lang]`` captions per language (tuple objectives)
    GroupBalancedBatchSampler     the same with equal shares of MULE's photo groups in every batch
    TextTupleBatchSampler         text-only caption tuples (text_corpus), capped per epoch
    InterleavedTextTupleSampler   text-only batches spread over the image batches
    CaptionSubsetSampler, DrawnCaptionsSampler, StagedSampler, RepeatedPassSampler   how an epoch is made
                                  (``epochs``)

The tuple samplers draw their caption slots through one ``CaptionSlots`` (``slots``).
"""

from .distinct import DistinctPhotoBatchSampler
from .epochs import CaptionSubsetSampler, DrawnCaptionsSampler, RepeatedPassSampler, StagedSampler
from .group_balanced import GroupBalancedBatchSampler
from .photo_tuples import PhotoTupleBatchSampler
from .slots import CaptionSlots, slot_languages
from .text_tuples import InterleavedTextTupleSampler, TextTupleBatchSampler

__all__ = [
    "CaptionSlots",
    "CaptionSubsetSampler",
    "DistinctPhotoBatchSampler",
    "DrawnCaptionsSampler",
    "GroupBalancedBatchSampler",
    "InterleavedTextTupleSampler",
    "PhotoTupleBatchSampler",
    "RepeatedPassSampler",
    "StagedSampler",
    "TextTupleBatchSampler",
    "slot_languages",
]
