"""The HTTP service: JSON endpoints + the web page, over one model and the index it built.

Endpoints (OpenAPI schema at /openapi.json, interactive docs at /docs):

    GET  /api/health                       liveness + sizes
    GET  /api/model                        languages, similarity, index and limits
    POST /api/search/text                  {"query", "lang" (code or "auto"), "k"} -> photos
    GET  /api/search/text?q=&lang=&k=      the same, for links and curl
    POST /api/search/image                 multipart upload "file" (+ k) -> photos
    GET  /api/photos/{id}/similar?k=       photos like an indexed photo
    POST /api/captions/image               multipart upload "file" (+ k, lang) -> captions of the collection
    GET  /api/photos/{id}/captions?k=&lang= captions for an indexed photo
    GET  /api/photos/{id}                  the photo file        (ids of the index only: never a path)
    GET  /api/photos/{id}/thumbnail?size=  a JPEG thumbnail
    GET  /                                 the web page (static files under /static); ?q=&lang=&k= or
                                           ?similar=ID&k= opens it on that search

Bad input gets a 4xx whose JSON ``detail`` says what is wrong: 404 unknown photo id or route, 413 body
over the upload cap, 415 wrong content type, 422 anything else (empty / over-long / all-unknown-word
query, unknown language, undetectable language, not an image, truncated image, too many pixels, bad k).
"""
from __future__ import annotations

import io
import mimetypes
import re
import threading
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

from fastapi import FastAPI, File, Form, HTTPException, Query, Request, UploadFile
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, Field

from polyvse import __version__
from polyvse.errors import PolyvseError
from polyvse.features.images import DEFAULT_MAX_PIXELS
from polyvse.index import CaptionCollection, Hit, Searcher
from polyvse.index.fingerprint import short

STATIC = Path(__file__).resolve().parent / "static"
THUMB_SIZES = (64, 128, 192, 256, 384, 512)


@dataclass
class ServeSettings:
    max_upload_bytes: int = 8 * 1024 * 1024  # whole request body, multipart overhead included
    max_pixels: int = DEFAULT_MAX_PIXELS  # uploads above this are refused before decoding (40 MP)
    max_query_chars: int = 1000
    max_k: int = 100
    default_k: int = 12
    thumbnail_cache: int = 2048  # thumbnails kept in memory (LRU)


# -- response models (they make the OpenAPI schema) -----------------------------------------------------------
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


class TextSearchRequest(BaseModel):
    query: str = Field(description="what the photo shows, in one of the model's languages")
    lang: str = Field("auto", description="ISO 639-1 code of the query's language, or 'auto' to detect it")
    k: int = Field(12, description="number of photos")


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


ERRORS = {404: {"model": ErrorBody}, 413: {"model": ErrorBody}, 415: {"model": ErrorBody},
          422: {"model": ErrorBody}}


# -- helpers --------------------------------------------------------------------------------------------------
class BodySizeLimit:
    """ASGI middleware: a request body larger than ``limit`` bytes gets a 413, read no further.

    Checked from Content-Length before anything is read, and counted while streaming for bodies without
    one (chunked), so an oversized upload is never spooled to disk or memory.
    """

    def __init__(self, app, limit: int):
        self.app = app
        self.limit = int(limit)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = None
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    length = int(value)
                except ValueError:
                    length = None
        message = (f"the request body is larger than the limit of {_mib(self.limit)}; "
                   "upload a smaller photo (a JPEG of a few MB at most)")
        if length is not None and length > self.limit:
            response = JSONResponse({"detail": message}, status_code=413, headers={"Connection": "close"})
            return await response(scope, receive, send)
        seen = 0

        async def limited_receive():
            nonlocal seen
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > self.limit:
                    raise HTTPException(status_code=413, detail=message)
            return msg

        return await self.app(scope, limited_receive, send)


def _mib(n: int) -> str:
    return f"{n / 1048576:.3g} MiB" if n >= 1048576 else f"{n / 1024:.3g} KiB"


def _readable(errors) -> str:
    parts = []
    for err in errors:
        loc = [str(x) for x in err.get("loc", ())[1:]]  # loc[0] is where: body, query, path, form
        where = ".".join(loc) or "request"
        msg = err.get("msg", "invalid")
        if err.get("type") == "missing":
            msg = "is required"
        elif where == "photo_id" and err.get("type", "").startswith("int"):
            msg = "must be a photo id (a whole number) from the index"
        parts.append(f"{where} {msg}" if msg == "is required" else f"{where}: {msg}")
    return "; ".join(parts) or "invalid request"


_SAFE_NAME = re.compile(r"[^\w.\- ]+")


def _upload_name(upload: UploadFile) -> str:
    """The client's file name for messages only (never used as a path): tame characters, capped length."""
    name = Path((upload.filename or "upload").replace("\\", "/")).name or "upload"
    return _SAFE_NAME.sub("_", name)[:80]


class _Thumbnails:
    def __init__(self, capacity: int):
        self.capacity = capacity
        self.items: OrderedDict = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key, make):
        with self.lock:
            if key in self.items:
                self.items.move_to_end(key)
                return self.items[key]
        value = make()
        with self.lock:
            self.items[key] = value
            while len(self.items) > self.capacity:
                self.items.popitem(last=False)
        return value


# -- the app --------------------------------------------------------------------------------------------------
def create_app(searcher: Searcher, captions: CaptionCollection | None = None,
               settings: ServeSettings | None = None) -> FastAPI:
    settings = settings or ServeSettings()
    index = searcher.index
    model = searcher.model
    thumbs = _Thumbnails(settings.thumbnail_cache)

    app = FastAPI(
        title="polyvse", version=__version__,
        description="Multilingual photo search: text in any of the model's languages -> photos, "
                    "photo -> photos, photo -> captions.",
    )
    app.add_middleware(BodySizeLimit, limit=settings.max_upload_bytes)

    @app.exception_handler(PolyvseError)
    async def polyvse_error(request: Request, exc: PolyvseError):
        return JSONResponse({"detail": str(exc)}, status_code=422)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError):
        status = 404 if any(e.get("loc", [None])[0] == "path" for e in exc.errors()) else 422
        return JSONResponse({"detail": _readable(exc.errors())}, status_code=status)

    def hits_json(hits: list[Hit]) -> list[dict]:
        return [{**h.to_dict(), "url": f"/api/photos/{h.id}", "thumbnail": f"/api/photos/{h.id}/thumbnail"}
                for h in hits]

    def check_k(k: int) -> int:
        if not 1 <= k <= settings.max_k:
            raise HTTPException(422, f"k must be between 1 and {settings.max_k}, not {k}")
        return k

    def entry(photo_id: int):
        if not 0 <= photo_id < index.count:
            raise HTTPException(404, f"no photo with id {photo_id} in the index (ids are 0..{index.count - 1})")
        return index.photos[photo_id]

    def read_upload(file: UploadFile) -> tuple[bytes, str]:
        ctype = (file.content_type or "").split(";")[0].strip().lower()
        name = _upload_name(file)
        if ctype and not (ctype.startswith("image/") or ctype == "application/octet-stream"):
            raise HTTPException(415, f"{name}: uploaded as {ctype!r}; send a photo (image/jpeg, image/png, ...)")
        data = file.file.read(settings.max_upload_bytes + 1)
        if len(data) > settings.max_upload_bytes:
            raise HTTPException(413, f"{name}: larger than the upload limit of {_mib(settings.max_upload_bytes)}")
        return data, name

    def text_search(query: str, lang: str, k: int) -> dict:
        t0 = time.perf_counter()
        check_k(k)
        result = searcher.text(query, lang, k, max_chars=settings.max_query_chars)
        return {"query": result.query, "lang": result.lang,
                "detected": result.detected.to_dict() if result.detected else None,
                "unknown_words": result.unknown_words, "took_ms": round((time.perf_counter() - t0) * 1000, 2),
                "results": hits_json(result.hits)}

    # -- service -------------------------------------------------------------------------------------------
    # cheap endpoints run on the event loop (async), the rest in the thread pool (model, disk, decoding)
    @app.get("/api/health", response_model=Health, tags=["service"])
    async def health():
        return {"status": "ok", "photos": index.count, "captions": len(captions) if captions else 0}

    @app.get("/api/model", tags=["service"])
    async def model_info():
        from polyvse.langid import language_name

        m = index.manifest
        return {
            "polyvse_version": __version__,
            "languages": model.languages,
            "language_names": {c: language_name(c) for c in model.languages},
            "similarity": searcher.similarity,
            "embed_dim": model.embed_dim,
            "backbone": model.checkpoint.backbone,
            "fingerprint": index.fingerprint,
            "fingerprint_short": short(index.fingerprint),
            "index": {"photos": index.count, "kind": index.kind,
                      "recall_target": m["search"].get("recall_target"),
                      "measured_recall": m["search"].get("measured_recall"),
                      "description": index.describe()},
            "captions": ({"count": len(captions), "languages": captions.languages} if captions else None),
            "limits": asdict(settings),
        }

    # -- search --------------------------------------------------------------------------------------------
    @app.post("/api/search/text", response_model=TextSearchResponse, responses=ERRORS, tags=["search"])
    def search_text(body: TextSearchRequest):
        """Photos for a text query. lang: a code the model knows, or "auto" (refused when unclear)."""
        return text_search(body.query, body.lang, body.k)

    @app.get("/api/search/text", response_model=TextSearchResponse, responses=ERRORS, tags=["search"])
    def search_text_get(q: str = Query(..., description="the query"), lang: str = Query("auto"),
                        k: int = Query(12)):
        return text_search(q, lang, k)

    @app.post("/api/search/image", response_model=ImageSearchResponse, responses=ERRORS, tags=["search"])
    def search_image(file: UploadFile = File(..., description="a photo (JPEG, PNG, WebP, ...)"),
                     k: int = Form(12)):
        """Photos like an uploaded photo."""
        t0 = time.perf_counter()
        check_k(k)
        data, name = read_upload(file)
        vec, size = _embed_upload(data, name)
        hits = searcher.search_vectors(vec, k)[0]
        return {"took_ms": round((time.perf_counter() - t0) * 1000, 2),
                "image": {"name": name, "width": size[0], "height": size[1], "bytes": len(data)},
                "results": hits_json(hits)}

    def _embed_upload(data: bytes, name: str):
        from polyvse.features.images import load_image

        image = load_image(data, settings.max_pixels, name=name)
        return searcher.embed_pil(image), image.size

    @app.get("/api/photos/{photo_id}/similar", response_model=ImageSearchResponse, responses=ERRORS,
             tags=["search"])
    def similar(photo_id: int = PathParam(..., description="photo id in the index"), k: int = Query(12)):
        t0 = time.perf_counter()
        check_k(k)
        e = entry(photo_id)
        hits = searcher.similar(e.id, k)
        return {"took_ms": round((time.perf_counter() - t0) * 1000, 2), "image": {"id": e.id, "name": e.name},
                "results": hits_json(hits)}

    # -- captions ------------------------------------------------------------------------------------------
    def need_captions() -> CaptionCollection:
        if captions is None or len(captions) == 0:
            raise HTTPException(404, "this server has no caption collection; start it with "
                                     "`polyvse serve ... --captions FILE`")
        return captions

    @app.post("/api/captions/image", response_model=CaptionSearchResponse, responses=ERRORS, tags=["captions"])
    def captions_for_upload(file: UploadFile = File(...), k: int = Form(5), lang: Optional[str] = Form(None)):
        """Captions of the collection that best describe an uploaded photo."""
        t0 = time.perf_counter()
        coll = need_captions()
        check_k(k)
        data, name = read_upload(file)
        vec, _ = _embed_upload(data, name)
        results = coll.rank(vec[0], k, lang or None)
        return {"took_ms": round((time.perf_counter() - t0) * 1000, 2), "results": [r.to_dict() for r in results]}

    @app.get("/api/photos/{photo_id}/captions", response_model=CaptionSearchResponse, responses=ERRORS,
             tags=["captions"])
    def captions_for_photo(photo_id: int, k: int = Query(5), lang: Optional[str] = Query(None)):
        t0 = time.perf_counter()
        coll = need_captions()
        check_k(k)
        e = entry(photo_id)
        results = coll.rank(index.vector(e.id), k, lang or None)
        return {"took_ms": round((time.perf_counter() - t0) * 1000, 2), "results": [r.to_dict() for r in results]}

    # -- photos (by id only) -------------------------------------------------------------------------------
    @app.get("/api/photos/{photo_id}", responses={**ERRORS, 200: {"content": {"image/jpeg": {}}}},
             response_class=Response, tags=["photos"])
    def photo(photo_id: int):
        e = entry(photo_id)
        path = Path(e.path)
        if not path.is_file():
            raise HTTPException(404, f"photo {photo_id} ({e.name}) is in the index but its file is gone")
        media = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        return FileResponse(path, media_type=media, headers={"Cache-Control": "public, max-age=3600"})

    @app.get("/api/photos/{photo_id}/thumbnail", responses={**ERRORS, 200: {"content": {"image/jpeg": {}}}},
             response_class=Response, tags=["photos"])
    def thumbnail(photo_id: int, size: int = Query(256, description=f"one of {THUMB_SIZES}")):
        e = entry(photo_id)
        if size not in THUMB_SIZES:
            raise HTTPException(422, f"size must be one of {', '.join(map(str, THUMB_SIZES))}, not {size}")

        def make() -> bytes:
            from polyvse.features.images import load_image

            try:
                img = load_image(e.path, settings.max_pixels)
            except PolyvseError:
                raise HTTPException(404, f"photo {photo_id} ({e.name}) can no longer be read") from None
            img.thumbnail((size, size))
            buf = io.BytesIO()
            img.save(buf, format="JPEG", quality=85)
            return buf.getvalue()

        data = thumbs.get((e.id, size), make)
        return Response(data, media_type="image/jpeg", headers={"Cache-Control": "public, max-age=3600"})

    # -- the web page --------------------------------------------------------------------------------------
    @app.get("/", include_in_schema=False)
    def page():
        return FileResponse(STATIC / "index.html", media_type="text/html")

    @app.get("/index.html", include_in_schema=False)
    def page_redirect(request: Request):
        # the query string is the page's search (?q=&lang=&k=): a shared /index.html?q=... link keeps it
        query = request.url.query
        return RedirectResponse("/" + ("?" + query if query else ""))

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return app
