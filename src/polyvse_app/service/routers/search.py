"""Photo search: by text (POST, and GET for links and curl), by an uploaded photo, by an indexed photo."""

from __future__ import annotations

import time

from fastapi import APIRouter, File, Form, Query, UploadFile

from ..schemas import (
    ERRORS,
    K_LIMITS,
    PHOTO_UPLOAD,
    QUERY_LIMITS,
    ImageSearchResponse,
    PhotoId,
    TextSearchRequest,
    TextSearchResponse,
)
from ..settings import DEFAULT_K
from ..state import Service, ServiceState, hits_json, took_ms

router = APIRouter(prefix="/api", tags=["search"], responses=ERRORS)


def text_search(service: ServiceState, query: str, lang: str, k: int) -> dict:
    t0 = time.perf_counter()
    result = service.searcher.text(query, lang, k, max_chars=service.settings.max_query_chars)
    return {
        "query": result.query,
        "lang": result.lang,
        "detected": result.detected.to_dict() if result.detected else None,
        "unknown_words": result.unknown_words,
        "took_ms": took_ms(t0),
        "results": hits_json(result.hits),
    }


@router.post("/search/text", response_model=TextSearchResponse)
def search_text(body: TextSearchRequest, service: Service):
    """Photos for a text query. lang: a code the model knows, or "auto" (refused when unclear)."""
    return text_search(service, body.query, body.lang, body.k)


@router.get("/search/text", response_model=TextSearchResponse)
def search_text_get(
    service: Service,
    q: str = Query(..., description="the query", **QUERY_LIMITS),
    lang: str = Query("auto"),
    k: int = Query(DEFAULT_K, **K_LIMITS),
):
    return text_search(service, q, lang, k)


@router.post("/search/image", response_model=ImageSearchResponse, openapi_extra=PHOTO_UPLOAD)
def search_image(
    service: Service,
    file: UploadFile = File(..., description="a photo (JPEG, PNG, WebP, ...)"),
    k: int = Form(DEFAULT_K, **K_LIMITS),
):
    """Photos like an uploaded photo."""
    t0 = time.perf_counter()
    data, name = service.read_upload(file)
    vec, size = service.embed_upload(data, name)
    hits = service.searcher.search_vectors(vec, k)[0]
    return {
        "took_ms": took_ms(t0),
        "image": {"name": name, "width": size[0], "height": size[1], "bytes": len(data)},
        "results": hits_json(hits),
    }


@router.get("/photos/{photo_id}/similar", response_model=ImageSearchResponse)
def similar(service: Service, photo_id: PhotoId, k: int = Query(DEFAULT_K, **K_LIMITS)):
    t0 = time.perf_counter()
    e = service.photo(photo_id)
    hits = service.searcher.similar(e.id, k)
    return {"took_ms": took_ms(t0), "image": {"id": e.id, "name": e.name}, "results": hits_json(hits)}
