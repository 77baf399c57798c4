"""The photo-size limit, apart from the photo loader (:mod:`.images`): what reads only the limit (an index's
settings, the service's) does not import Pillow, so a text query's process never does."""

from __future__ import annotations

__all__ = ["DEFAULT_MAX_PIXELS"]

#: Refuse photos with more pixels than this (40 megapixels: above any phone or DSLR photo a
#: retrieval system meets in practice, far below what would exhaust memory when decoded).
DEFAULT_MAX_PIXELS = 40_000_000
