"""Photo -> captions: the captions of the server's collection (`polyvse serve --captions FILE`) that best
describe an uploaded or an indexed photo."""

from __future__ import annotations

import time

from fastapi import APIRouter, File, Form, Query, UploadFile

from ..schemas import ERRORS, K_LIMITS, PHOTO_UPLOAD, CaptionSearchResponse, PhotoId
from ..state import Service, took_ms

router = APIRouter(prefix="/api", tags=["captions"], responses=ERRORS)
CAPTION_LANG = "only captions in this language (one of the collection's); all languages when left out"


@router.post("/captions/image", response_model=CaptionSearchResponse, openapi_extra=PHOTO_UPLOAD)
def captions_for_upload(
    service: Service,
    file: UploadFile = File(...),
    k: int = Form(5, **K_LIMITS),
    lang: str | None = Form(None, description=CAPTION_LANG),
):
    """Captions of the collection that best describe an uploaded photo."""
    t0 = time.perf_counter()
    collection = service.need_captions()
    data, name = service.read_upload(file)
    vec, _ = service.embed_upload(data, name)
    results = collection.rank(vec[0], k, lang)
    return {"took_ms": took_ms(t0), "results": [r.to_dict() for r in results]}


@router.get("/photos/{photo_id}/captions", response_model=CaptionSearchResponse)
def captions_for_photo(
    service: Service,
    photo_id: PhotoId,
    k: int = Query(5, **K_LIMITS),
    lang: str | None = Query(None, description=CAPTION_LANG),
):
    t0 = time.perf_counter()
    collection = service.need_captions()
    e = service.photo(photo_id)
    results = collection.rank(service.index.vector(e.id), k, lang)
    return {"took_ms": took_ms(t0), "results": [r.to_dict() for r in results]}
