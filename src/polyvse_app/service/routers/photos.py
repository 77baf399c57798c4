"""The indexed photos' files and thumbnails, by index id only (a client never names a path)."""
from __future__ import annotations

import io
import mimetypes
from pathlib import Path

from fastapi import APIRouter, HTTPException, Query
from fastapi.responses import FileResponse, Response

from polyvse.errors import PolyvseError

from ..schemas import IMAGE_ERRORS
from ..settings import THUMB_SIZES
from ..state import Service

router = APIRouter(prefix="/api/photos", tags=["photos"], responses=IMAGE_ERRORS,
                   default_response_class=Response)
CACHE_HEADERS = {"Cache-Control": "public, max-age=3600"}


@router.get("/{photo_id}")
def photo(service: Service, photo_id: int):
    e = service.photo(photo_id)
    path = Path(e.path)
    if not path.is_file():
        raise HTTPException(404, f"photo {photo_id} ({e.name}) is in the index but its file is gone")
    media = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    return FileResponse(path, media_type=media, headers=CACHE_HEADERS)


@router.get("/{photo_id}/thumbnail")
def thumbnail(service: Service, photo_id: int, size: int = Query(256, description=f"one of {THUMB_SIZES}")):
    e = service.photo(photo_id)
    if size not in THUMB_SIZES:
        raise HTTPException(422, f"size must be one of {', '.join(map(str, THUMB_SIZES))}, not {size}")

    def make() -> bytes:
        from polyvse.features.images import load_image

        try:
            img = load_image(e.path, service.settings.max_pixels)
        except PolyvseError:
            raise HTTPException(404, f"photo {photo_id} ({e.name}) can no longer be read") from None
        img.thumbnail((size, size))
        buf = io.BytesIO()
        img.save(buf, format="JPEG", quality=85)
        return buf.getvalue()

    return Response(service.thumbnails.get((e.id, size), make), media_type="image/jpeg", headers=CACHE_HEADERS)
