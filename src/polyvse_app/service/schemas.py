"""Request and response models of the JSON endpoints (they make the OpenAPI schema at /openapi.json)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path
from pydantic import BaseModel, Field

from .settings import DEFAULT_K, MAX_K, MAX_QUERY_CHARS

# The limits the server enforces, declared where FastAPI puts them in the OpenAPI schema (Field, Query, Form):
# pydantic checks them, so a request the schema allows is never refused for its size or range.
#: k, the number of results: Field/Query/Form(default, **K_LIMITS)
K_LIMITS = {"ge": 1, "le": MAX_K, "description": f"number of results, 1..{MAX_K}"}
#: a text query: some character that is not a space (str.split(), which trims queries, also splits on the
#: separators \x1c-\x1f that regex \s leaves out), at most MAX_QUERY_CHARS characters
QUERY_LIMITS = {"min_length": 1, "max_length": MAX_QUERY_CHARS, "pattern": r"[^\s\x1c-\x1f]"}
#: a photo id path parameter (an id past the index's end is a 404: the count changes as photos are added)
PhotoId = Annotated[int, Path(ge=0, description="photo id in the index")]


class PhotoHit(BaseModel):
    rank: int
    id: int = Field(description="photo id in the index; GET /api/photos/{id} serves it")
    name: str = Field(description="the photo's name relative to the indexed folder")
    score: float = Field(description="the model's similarity (cosine for cosine models)")
    url: str
    thumbnail: str


class Detected(BaseModel):
    lang: str
    confidence: float
    candidates: list[dict]
    decided_by: str = Field(
        "detection",
        description="'detection' (confident); 'plausible': the language is "
        "unclear and the query was searched as a plausible one, a trained language first; or "
        "'same answer': unclear, and every plausible one gave the same top photos (only when "
        "an agreement is asked; polyvse.text.langid)",
    )
    agreement: float | None = Field(
        None,
        description="with 'same answer': the share of the top k photos every plausible language's search has in common",
    )


class TextSearchRequest(BaseModel):
    query: str = Field(description="what the photo shows, in one of the model's languages", **QUERY_LIMITS)
    lang: str = Field(
        "auto",
        description="ISO 639 code of the query's language, one the model serves "
        "(GET /api/model: served_languages), or 'auto' to detect it",
    )
    k: int = Field(DEFAULT_K, **K_LIMITS)


class TextSearchResponse(BaseModel):
    query: str
    lang: str
    detected: Detected | None = None
    unknown_words: list[str]
    took_ms: float
    results: list[PhotoHit]


class ImageSearchResponse(BaseModel):
    took_ms: float
    image: dict
    results: list[PhotoHit]


class CaptionResult(BaseModel):
    rank: int
    lang: str
    caption: str
    score: float
    image: str | None = None


class CaptionSearchResponse(BaseModel):
    took_ms: float
    results: list[CaptionResult]


class Health(BaseModel):
    status: str
    photos: int
    captions: int
    generation: int = Field(
        description="version of the index being served: `polyvse index add` and `index build "
        "--force` make a new one, which the server picks up without a restart"
    )


class ErrorBody(BaseModel):
    detail: str


#: the 4xx answers of the endpoints that take input, each a JSON ``{"detail": "what is wrong"}``
ERRORS = {
    400: {"model": ErrorBody, "description": "the body is not JSON or multipart form data"},
    404: {"model": ErrorBody, "description": "no such photo id (or route); no caption collection"},
    413: {"model": ErrorBody, "description": "the upload is larger than the server's limit"},
    415: {"model": ErrorBody, "description": "the upload is not sent as an image"},
    422: {
        "model": ErrorBody,
        "description": "the request breaks this schema, or its content cannot be "
        "used: a query whose language cannot be told or none of whose words the model knows, a file "
        "that is not a readable image or has more pixels than the server's limit",
    },
}
UNAUTHORIZED = {401: {"model": ErrorBody, "description": "no token or a wrong one (a server started with --token)"}}
#: the answer of a thumbnail (always a JPEG) and of a photo file (the indexed file as it is)
JPEG = {200: {"content": {"image/jpeg": {}}, "description": "a JPEG"}}
PHOTO_FILE = {200: {"content": {"image/*": {}}, "description": "the photo file as indexed"}}
#: multipart uploads: the file part is a photo (the schema's file field gets minLength/maxLength per app: app.py)
PHOTO_UPLOAD = {"requestBody": {"content": {"multipart/form-data": {"encoding": {"file": {"contentType": "image/*"}}}}}}
