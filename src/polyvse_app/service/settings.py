"""The service's limits: one ServeSettings per app (`polyvse serve` fills it from its options)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import ClassVar

from polyvse.features.limits import DEFAULT_MAX_PIXELS
from polyvse.index.search import MAX_QUERY_CHARS

THUMB_SIZES = (64, 128, 192, 256, 384, 512)
# photos per search when a request names no k: the endpoints' declared default and /api/model's default_k
DEFAULT_K = 12
MAX_K = 100
# room for the form fields and part headers beside an upload of max_upload_bytes in one multipart body
MULTIPART_SLACK = 64 * 1024


@dataclass
class ServeSettings:
    # declared by the OpenAPI schema (schemas.py), so the same for every app: the schema is the contract
    max_k: ClassVar[int] = MAX_K
    max_query_chars: ClassVar[int] = MAX_QUERY_CHARS
    default_k: ClassVar[int] = DEFAULT_K

    max_upload_bytes: int = 8 * 1024 * 1024  # an uploaded photo file (declared per app as the file's maxLength)
    max_pixels: int = DEFAULT_MAX_PIXELS  # uploads above this are refused before decoding (40 MP)
    thumbnail_cache: int = 2048  # thumbnails kept in memory (LRU)
    # photos decoded at once (uploads and thumbnails): each may take max_pixels x 3 bytes until it is done
    decode_concurrency: int = field(default_factory=lambda: os.cpu_count() or 1)
    reload_interval_s: float = 1.0  # how often a request checks the index folder for a new version (live.py)
    token: str | None = field(default=None, repr=False)  # when set, /api wants it (auth.py)

    def limits(self) -> dict:
        """The limits as /api/model reports them (never the token)."""
        return {
            "max_upload_bytes": self.max_upload_bytes,
            "max_pixels": self.max_pixels,
            "max_query_chars": self.max_query_chars,
            "max_k": self.max_k,
            "default_k": self.default_k,
            "thumbnail_sizes": list(THUMB_SIZES),
            "thumbnail_cache": self.thumbnail_cache,
            "decode_concurrency": self.decode_concurrency,
        }

    @property
    def max_body_bytes(self) -> int:
        """The cap on a whole request body: an upload of max_upload_bytes and its form fields fit."""
        return self.max_upload_bytes + MULTIPART_SLACK


def mib(n: int) -> str:
    """A byte count for messages: 8 MiB, 977 KiB."""
    return f"{n / 1048576:.3g} MiB" if n >= 1048576 else f"{n / 1024:.3g} KiB"
