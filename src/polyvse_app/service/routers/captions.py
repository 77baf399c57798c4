"""Photo -> captions: the captions of the server's collection (`polyvse serve --captions FILE`) that best
describe an uploaded or an indexed photo."""
from __future__ import annotations

import time
from typing import Optional

from fastapi import APIRouter, File, Form, Query, UploadFile

from ..schemas import ERRORS, CaptionSearchResponse
from ..state import Service, took_ms

router = APIRouter(prefix="/api", tags=["captions"], responses=ERRORS)


@router.post("/captions/image", response_model=CaptionSearchResponse)
def captions_for_upload(service: Service, file: UploadFile = File(...), k: int = Form(5),
                        lang: Optional[str] = Form(None)):
    """Captions of the collection that best describe an uploaded photo."""
    t0 = time.perf_counter()
    collection = service.need_captions()
    service.check_k(k)
    data, name = service.read_upload(file)
    vec, _ = service.embed_upload(data, name)
    results = collection.rank(vec[0], k, lang or None)
    return {"took_ms": took_ms(t0), "results": [r.to_dict() for r in results]}


@router.get("/photos/{photo_id}/captions", response_model=CaptionSearchResponse)
def captions_for_photo(service: Service, photo_id: int, k: int = Query(5), lang: Optional[str] = Query(None)):
    t0 = time.perf_counter()
    collection = service.need_captions()
    service.check_k(k)
    e = service.photo(photo_id)
    results = collection.rank(service.index.vector(e.id), k, lang or None)
    return {"took_ms": took_ms(t0), "results": [r.to_dict() for r in results]}
