"""The HTTP service: JSON endpoints + the web page, over one model and the index it built.

Endpoints (OpenAPI schema at /openapi.json, interactive docs at /docs), one router each (routers/):

    meta      GET  /api/health                       liveness + sizes
              GET  /api/model                        languages, similarity, index and limits
    search    POST /api/search/text                  {"query", "lang" (code or "auto"), "k"} -> photos
              GET  /api/search/text?q=&lang=&k=      the same, for links and curl
              POST /api/search/image                 multipart upload "file" (+ k) -> photos
              GET  /api/photos/{id}/similar?k=       photos like an indexed photo
    captions  POST /api/captions/image               multipart upload "file" (+ k, lang) -> captions of the collection
              GET  /api/photos/{id}/captions?k=&lang= captions for an indexed photo
    photos    GET  /api/photos/{id}                  the photo file        (ids of the index only: never a path)
              GET  /api/photos/{id}/thumbnail?size=  a JPEG thumbnail
    page      GET  /                                 the web page (static files under /static); ?q=&lang=&k= or
                                                     ?similar=ID&k= opens it on that search

Bad input gets a 4xx whose JSON ``detail`` says what is wrong (errors.py): 401 no or wrong token (a server
started with --token: auth.py), 404 unknown photo id or route, 405 a method the path does not take, 413 body
over the upload cap, 415 wrong content type, 422 anything else (empty / over-long / all-unknown-word query,
unknown language, undetectable language, not an image, truncated image, too many pixels, bad k).

The OpenAPI schema is the contract: every limit the server checks on a request's form (k, query length, thumbnail
size, photo id, upload size, language codes) is declared in it, so a request it allows is refused only for its
content (a query in no language the model knows, a file that is not a photo). tests/test_serve_schema.py runs
schemathesis against it.
"""

from __future__ import annotations

from fastapi import Depends, FastAPI
from fastapi.staticfiles import StaticFiles

from polyvse import __version__
from polyvse.index import CaptionCollection, Searcher

from .auth import token_dependency
from .errors import add_error_handling
from .routers import ROUTERS
from .routers.page import STATIC
from .schemas import UNAUTHORIZED
from .settings import ServeSettings
from .state import ServiceState


def create_app(
    searcher: Searcher, captions: CaptionCollection | None = None, settings: ServeSettings | None = None
) -> FastAPI:
    """The app over a loaded model's searcher (and, for photo -> caption, an embedded caption collection)."""
    settings = settings or ServeSettings()
    app = FastAPI(
        title="polyvse",
        version=__version__,
        description="Multilingual photo search: text in any of the model's languages -> photos, "
        "photo -> photos, photo -> captions.",
    )
    # loaded before the app exists (build_app), so that a bad index or model fails before the port opens
    app.state.service = ServiceState(searcher, captions, settings)
    add_error_handling(app, settings)
    guard = (
        {"dependencies": [Depends(token_dependency(settings.token))], "responses": UNAUTHORIZED}
        if settings.token
        else {}
    )
    for router in ROUTERS:
        app.include_router(router, **(guard if router.prefix.startswith("/api") else {}))
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    def openapi() -> dict:
        if app.openapi_schema is None:
            app.openapi_schema = declare_app_limits(FastAPI.openapi(app), searcher, captions, settings)
        return app.openapi_schema

    app.openapi = openapi
    return app


def declare_app_limits(
    schema: dict, searcher: Searcher, captions: CaptionCollection | None, settings: ServeSettings
) -> dict:
    """Complete FastAPI's schema with what depends on this app: the languages ``lang`` may name (those the model
    serves, and "auto", for a text query; the collection's for captions) and an upload's size limits."""
    query_langs = [*searcher.served_languages, "auto"]
    caption_langs = captions.languages if captions else list(searcher.languages)
    for path, operations in schema["paths"].items():
        langs = caption_langs if "/captions" in path else query_langs
        for operation in operations.values():
            for param in operation.get("parameters", []):
                if param["name"] == "lang":
                    param["schema"] = _enum(param["schema"], langs)
            for media_type, media in operation.get("requestBody", {}).get("content", {}).items():
                name = media.get("schema", {}).get("$ref", "").rsplit("/", 1)[-1]
                body = schema["components"]["schemas"].get(name, {})
                props = body.get("properties", {})
                if "lang" in props:
                    props["lang"] = _enum(props["lang"], langs)
                if "file" in props:  # the bytes of the photo: not empty, not above the upload limit
                    props["file"].update(minLength=1, maxLength=settings.max_upload_bytes)
                if media_type == "multipart/form-data":
                    for field in set(props) - set(body.get("required", [])):
                        props[field] = _or_empty(props[field])
    return schema


def _or_empty(prop: dict) -> dict:
    """An optional form field may also come empty, as an HTML form sends it: FastAPI reads that as its default."""
    meta = {k: v for k, v in prop.items() if k in ("title", "description", "default")}
    rest = {k: v for k, v in prop.items() if k not in meta}
    return {**meta, "anyOf": [rest, {"type": "string", "maxLength": 0}]}


def _enum(prop: dict, values: list[str]) -> dict:
    """A string property (or an optional one: anyOf string/null) narrowed to ``values``, keeping its metadata."""
    keep = {k: v for k, v in prop.items() if k not in ("type", "anyOf") and not (k == "default" and v is None)}
    return {**keep, "type": "string", "enum": list(values)}


def build_app(index_path, checkpoint=None, captions_path=None, captions_lang=None, settings=None, device="auto"):
    """Open the index, load its model on ``device`` (refusing a mismatch), embed the caption collection once,
    make the app.

    Returns (app, searcher, captions or None).
    """
    from polyvse.index import PhotoIndex, model_for_index, read_caption_file

    index = PhotoIndex.open(index_path)
    model, _ = model_for_index(index, checkpoint, device=device)
    searcher = Searcher(model, index)
    captions = None
    if captions_path:
        captions = CaptionCollection(
            searcher, read_caption_file(captions_path, captions_lang), source=str(captions_path)
        )
    return create_app(searcher, captions, settings), searcher, captions
