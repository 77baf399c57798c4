"""The indexed photos' files and thumbnails, by index id only (a client never names a path)."""

from __future__ import annotations

import io
import mimetypes
from enum import IntEnum
from pathlib import Path

from fastapi import APIRouter, HTTPException, Query
from fastapi.responses import FileResponse, Response

from polyvse.errors import PolyvseError

from ..schemas import ERRORS, JPEG, PHOTO_FILE, PhotoId
from ..settings import THUMB_SIZES
from ..state import Service

router = APIRouter(prefix="/api/photos", tags=["photos"], responses=ERRORS, default_response_class=Response)
CACHE_HEADERS = {"Cache-Control": "public, max-age=3600"}
# the schema lists the sizes (an enum); an IntEnum, not a Literal, so that "?size=128" parses
ThumbnailSize = IntEnum("ThumbnailSize", {f"px{size}": size for size in THUMB_SIZES})


@router.get("/{photo_id}", responses=PHOTO_FILE)
def photo(service: Service, photo_id: PhotoId):
    e = service.photo(photo_id)
    path = Path(e.path)
    if not path.is_file():
        raise HTTPException(404, f"photo {photo_id} ({e.name}) is in the index but its file is gone")
    media = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    return FileResponse(path, media_type=media, headers=CACHE_HEADERS)


@router.get("/{photo_id}/thumbnail", responses=JPEG)
def thumbnail(
    service: Service,
    photo_id: PhotoId,
    size: ThumbnailSize = Query(ThumbnailSize.px256, description="longest side in pixels"),
):
    e = service.photo(photo_id)
    side = int(size)

    def make() -> bytes:
        from polyvse.features.images import load_image

        with service.decode_slots:
            try:
                img = load_image(e.path, service.settings.max_pixels)
            except PolyvseError:
                raise HTTPException(404, f"photo {photo_id} ({e.name}) can no longer be read") from None
            img.thumbnail((side, side))
            buf = io.BytesIO()
            img.save(buf, format="JPEG", quality=85)
            return buf.getvalue()

    # by path, not id: a rebuilt index (index build --force) may give an id to another photo
    return Response(service.thumbnails.get((e.path, side), make), media_type="image/jpeg", headers=CACHE_HEADERS)
