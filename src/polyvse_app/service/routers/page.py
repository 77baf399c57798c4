"""The web page: GET / serves static/index.html (its scripts and styles are mounted at /static by create_app);
?q=&lang=&k= or ?similar=ID&k= opens it on that search (app.js reads the query string)."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, RedirectResponse

STATIC = Path(__file__).resolve().parent.parent / "static"

router = APIRouter(include_in_schema=False)


@router.get("/")
def page():
    return FileResponse(STATIC / "index.html", media_type="text/html")


@router.get("/index.html")
def page_redirect(request: Request):
    # the query string is the page's search (?q=&lang=&k=): a shared /index.html?q=... link keeps it
    query = request.url.query
    return RedirectResponse("/" + ("?" + query if query else ""))
