"""The service's limits: one ServeSettings per app (`polyvse serve` fills it from its options)."""
from __future__ import annotations

from dataclasses import dataclass

from polyvse.features.images import DEFAULT_MAX_PIXELS
from polyvse.index.search import MAX_QUERY_CHARS

THUMB_SIZES = (64, 128, 192, 256, 384, 512)
# photos per search when a request names no k: the endpoints' declared default and /api/model's default_k
DEFAULT_K = 12


@dataclass
class ServeSettings:
    max_upload_bytes: int = 8 * 1024 * 1024  # whole request body, multipart overhead included
    max_pixels: int = DEFAULT_MAX_PIXELS  # uploads above this are refused before decoding (40 MP)
    max_query_chars: int = MAX_QUERY_CHARS
    max_k: int = 100
    default_k: int = DEFAULT_K
    thumbnail_cache: int = 2048  # thumbnails kept in memory (LRU)


def mib(n: int) -> str:
    """A byte count for messages: 8 MiB, 977 KiB."""
    return f"{n / 1048576:.3g} MiB" if n >= 1048576 else f"{n / 1024:.3g} KiB"
