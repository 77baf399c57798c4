"""Bad input -> a 4xx whose JSON ``detail`` says what is wrong: the body-size cap (413) and the exception
handlers for library errors, request validation and methods a path does not take (405, with an Allow header
that lists every method of the path)."""

from __future__ import annotations

from fastapi import FastAPI, HTTPException, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match, Mount

from polyvse.errors import PolyvseError

from .settings import ServeSettings, mib

RETRY_AFTER_S = 5  # a 503's Retry-After: the search backend (a Milvus server) is down or reloading


class BodySizeLimit:
    """ASGI middleware: a request body larger than ``limit`` bytes gets a 413, read no further.

    Checked from Content-Length before anything is read, and counted while streaming for bodies without
    one (chunked), so an oversized upload is never spooled to disk or memory.
    """

    def __init__(self, app, limit: int, shown_limit: int | None = None):
        self.app = app
        self.limit = int(limit)
        self.shown_limit = int(shown_limit or limit)  # the upload limit users know, without the form's slack

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
        message = (
            f"the request body is larger than the limit of {mib(self.shown_limit)}; "
            "upload a smaller photo (a JPEG of a few MB at most)"
        )
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


def readable(errors) -> str:
    """Pydantic's validation errors as one sentence naming each field: "k: ...; query is required"."""
    parts = []
    for err in errors:
        loc = [str(x) for x in err.get("loc", ())[1:]]  # loc[0] is where: body, query, path, form
        where = ".".join(loc) or "request"
        msg = err.get("msg", "invalid")
        if err.get("type") == "missing":
            msg = "is required"
        elif where == "photo_id" and err.get("type", "").startswith("int"):
            msg = "must be a photo id (a whole number) from the index"
        elif err.get("type") == "string_unicode":
            msg = "contains characters that are not valid text (an unpaired surrogate?); send it as UTF-8"
        elif where in ("query", "q") and err.get("type") in ("string_too_short", "string_pattern_mismatch"):
            msg = "the query is empty; type a few words describing the photo you want"
        elif where in ("query", "q") and err.get("type") == "string_too_long":
            msg = (
                f"the query is {len(err.get('input', ''))} characters long; the limit is "
                f"{err.get('ctx', {}).get('max_length')}. Describe the photo in a sentence or two"
            )
        parts.append(f"{where} {msg}" if msg == "is required" else f"{where}: {msg}")
    return "; ".join(parts) or "invalid request"


async def polyvse_error(request: Request, exc: PolyvseError):
    """The library's own errors (empty query, unknown language, not an image, ...) are the client's: 422; an error
    that says what status it is (``http_status``: a Milvus index's database failing, 503) is sent with that; a 503
    tells clients when to ask again (the server may be back by then, and this process answers again without a
    restart)."""
    status = int(getattr(exc, "http_status", 422))
    headers = {"Retry-After": str(RETRY_AFTER_S)} if status == 503 else None
    return JSONResponse({"detail": str(exc)}, status_code=status, headers=headers)


async def validation_error(request: Request, exc: RequestValidationError):
    """A path that does not parse (/api/photos/abc) names no resource: 404; other bad input: 422."""
    status = 404 if any(e.get("loc", [None])[0] == "path" for e in exc.errors()) else 422
    return JSONResponse({"detail": readable(exc.errors())}, status_code=status)


HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


def allowed_methods(request: Request) -> list[str]:
    """The methods some route takes at the request's path, found by asking each route whether it would take the
    request with that method (FastAPI nests included routers, so their routes are not listed flat)."""
    routes = [route for route in request.app.router.routes if not isinstance(route, Mount)]  # static files: theirs
    return [
        method
        for method in HTTP_METHODS
        if any(route.matches({**request.scope, "method": method})[0] == Match.FULL for route in routes)
    ]


async def http_error(request: Request, exc: StarletteHTTPException):
    """FastAPI's own answer, but a 405 names every method of the path (Starlette's names only those of the first
    route it tried: GET and POST /api/search/text are two routes), and a 400 says what to send."""
    methods = ", ".join(allowed_methods(request)) if exc.status_code == 405 else ""
    if methods:
        exc = StarletteHTTPException(
            405, f"{request.method} is not allowed here; this path takes {methods}", headers={"Allow": methods}
        )
    elif exc.status_code == 400 and exc.detail == "There was an error parsing the body":
        exc = StarletteHTTPException(
            400,
            "the request body cannot be parsed: send JSON or a multipart form as "
            "/openapi.json describes for this endpoint",
        )
    return await http_exception_handler(request, exc)


def add_error_handling(app: FastAPI, settings: ServeSettings) -> None:
    app.add_middleware(BodySizeLimit, limit=settings.max_body_bytes, shown_limit=settings.max_upload_bytes)
    app.add_exception_handler(PolyvseError, polyvse_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
