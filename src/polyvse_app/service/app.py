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

Bad input gets a 4xx whose JSON ``detail`` says what is wrong (errors.py): 404 unknown photo id or route, 413
body over the upload cap, 415 wrong content type, 422 anything else (empty / over-long / all-unknown-word
query, unknown language, undetectable language, not an image, truncated image, too many pixels, bad k).
"""
from __future__ import annotations

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from polyvse import __version__
from polyvse.index import CaptionCollection, Searcher

from .errors import add_error_handling
from .routers import ROUTERS
from .routers.page import STATIC
from .settings import ServeSettings
from .state import ServiceState


def create_app(searcher: Searcher, captions: CaptionCollection | None = None,
               settings: ServeSettings | None = None) -> FastAPI:
    """The app over a loaded model's searcher (and, for photo -> caption, an embedded caption collection)."""
    settings = settings or ServeSettings()
    app = FastAPI(
        title="polyvse", version=__version__,
        description="Multilingual photo search: text in any of the model's languages -> photos, "
                    "photo -> photos, photo -> captions.",
    )
    # loaded before the app exists (build_app), so that a bad index or model fails before the port opens
    app.state.service = ServiceState(searcher, captions, settings)
    add_error_handling(app, settings.max_upload_bytes)
    for router in ROUTERS:
        app.include_router(router)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return app


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
        captions = CaptionCollection(searcher, read_caption_file(captions_path, captions_lang),
                                     source=str(captions_path))
    return create_app(searcher, captions, settings), searcher, captions
