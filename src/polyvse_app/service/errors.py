"""Bad input -> a 4xx whose JSON ``detail`` says what is wrong: the body-size cap (413) and the exception
handlers for library errors and request validation."""
from __future__ import annotations

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from polyvse.errors import PolyvseError

from .settings import mib


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
        message = (f"the request body is larger than the limit of {mib(self.limit)}; "
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
        parts.append(f"{where} {msg}" if msg == "is required" else f"{where}: {msg}")
    return "; ".join(parts) or "invalid request"


async def polyvse_error(request: Request, exc: PolyvseError):
    """The library's own errors (empty query, unknown language, not an image, ...) are the client's: 422."""
    return JSONResponse({"detail": str(exc)}, status_code=422)


async def validation_error(request: Request, exc: RequestValidationError):
    """A path that does not parse (/api/photos/abc) names no resource: 404; other bad input: 422."""
    status = 404 if any(e.get("loc", [None])[0] == "path" for e in exc.errors()) else 422
    return JSONResponse({"detail": readable(exc.errors())}, status_code=status)


def add_error_handling(app: FastAPI, max_upload_bytes: int) -> None:
    app.add_middleware(BodySizeLimit, limit=max_upload_bytes)
    app.add_exception_handler(PolyvseError, polyvse_error)
    app.add_exception_handler(RequestValidationError, validation_error)
