"""Request and response models of the JSON endpoints (they make the OpenAPI schema at /openapi.json)."""
from __future__ import annotations

from typing import Optional

from pydantic import BaseModel, Field

from .settings import DEFAULT_K


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
    decided_by: str = Field("detection", description="'detection' (confident), or 'same answer': the language is "
                            "unclear but every plausible one gives the same top photos (polyvse.langid)")
    agreement: Optional[float] = Field(None, description="with 'same answer': the share of the top k photos "
                                       "every plausible language's search has in common")


class TextSearchRequest(BaseModel):
    query: str = Field(description="what the photo shows, in one of the model's languages")
    lang: str = Field("auto", description="ISO 639 code of the query's language, one the model serves "
                      "(GET /api/model: served_languages), or 'auto' to detect it")
    k: int = Field(DEFAULT_K, description="number of photos")


class TextSearchResponse(BaseModel):
    query: str
    lang: str
    detected: Optional[Detected] = None
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
    image: Optional[str] = None


class CaptionSearchResponse(BaseModel):
    took_ms: float
    results: list[CaptionResult]


class Health(BaseModel):
    status: str
    photos: int
    captions: int


class ErrorBody(BaseModel):
    detail: str


#: the 4xx answers of the endpoints that take input, each a JSON ``{"detail": "what is wrong"}``
ERRORS = {404: {"model": ErrorBody}, 413: {"model": ErrorBody}, 415: {"model": ErrorBody},
          422: {"model": ErrorBody}}
#: ERRORS, for endpoints whose 200 answer is a JPEG rather than JSON
IMAGE_ERRORS = {**ERRORS, 200: {"content": {"image/jpeg": {}}}}
