"""What the endpoints share: the model's searcher over its index, the caption collection, the limits, the
thumbnail cache and the bound on concurrent photo decodes, held as ``app.state.service`` (made once by
create_app) and handed to each endpoint by the ``Service`` dependency, pinned to the index version in force when
the request came (live.py). The checks the endpoints share (photo id, upload) live here too; k and the query are
checked by the schema (schemas.py)."""

from __future__ import annotations

import copy
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

from fastapi import Depends, HTTPException, Request, UploadFile

from polyvse.index import CaptionCollection, Hit, Searcher

from .live import LiveSearcher
from .settings import ServeSettings, mib

_SAFE_NAME = re.compile(r"[^\w.\- ]+")


class ThumbnailCache:
    """The last ``capacity`` thumbnails made (LRU), shared by the request threads."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.items: OrderedDict = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key, make: Callable[[], bytes]) -> bytes:
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


class ServiceState:
    def __init__(self, searcher: Searcher, captions: CaptionCollection | None, settings: ServeSettings):
        self.live = LiveSearcher(searcher, settings.reload_interval_s)
        self.searcher = searcher
        self.model = searcher.model
        self.captions = captions
        self.settings = settings
        self.thumbnails = ThumbnailCache(settings.thumbnail_cache)
        # each decode may hold a max_pixels photo in memory (40 MP: 120 MB of RGB) until it is embedded
        self.decode_slots = threading.BoundedSemaphore(settings.decode_concurrency)

    @property
    def index(self):
        return self.searcher.index

    def pinned(self) -> ServiceState:
        """This state over the index version in force now (a newer one picked up first): what a request keeps to
        its end, so that its photo ids and its search refer to the same version."""
        pinned = copy.copy(self)
        pinned.searcher = self.live.current()
        return pinned

    def photo(self, photo_id: int):
        """The index entry of ``photo_id`` (404 outside the index: photos are served by id, never by path)."""
        if not 0 <= photo_id < self.index.count:
            raise HTTPException(404, f"no photo with id {photo_id} in the index (ids are 0..{self.index.count - 1})")
        return self.index.photos[photo_id]

    def need_captions(self) -> CaptionCollection:
        if self.captions is None or len(self.captions) == 0:
            raise HTTPException(
                404, "this server has no caption collection; start it with `polyvse serve ... --captions FILE`"
            )
        return self.captions

    def read_upload(self, file: UploadFile) -> tuple[bytes, str]:
        """(the uploaded bytes, the client's file name for messages); 415 for a non-image type, 413 over the cap."""
        ctype = (file.content_type or "").split(";")[0].strip().lower()
        name = upload_name(file)
        if ctype and not (ctype.startswith("image/") or ctype == "application/octet-stream"):
            raise HTTPException(415, f"{name}: uploaded as {ctype!r}; send a photo (image/jpeg, image/png, ...)")
        limit = self.settings.max_upload_bytes
        data = file.file.read(limit + 1)
        if len(data) > limit:
            raise HTTPException(413, f"{name}: larger than the upload limit of {mib(limit)}")
        return data, name

    def embed_upload(self, data: bytes, name: str):
        """(the photo's embedding, its (width, height)); decoding refuses more than max_pixels."""
        from polyvse.features.images import load_image

        with self.decode_slots:  # held until the embedding: the full-size photo is alive till then
            image = load_image(data, self.settings.max_pixels, name=name)
            return self.searcher.embed_pil(image), image.size


def upload_name(upload: UploadFile) -> str:
    """The client's file name for messages only (never used as a path): tame characters, capped length."""
    name = Path((upload.filename or "upload").replace("\\", "/")).name or "upload"
    return _SAFE_NAME.sub("_", name)[:80]


def hits_json(hits: list[Hit]) -> list[dict]:
    return [{**h.to_dict(), "url": f"/api/photos/{h.id}", "thumbnail": f"/api/photos/{h.id}/thumbnail"} for h in hits]


def took_ms(t0: float) -> float:
    """Milliseconds since ``t0`` (a time.perf_counter() reading), as the responses report them."""
    return round((time.perf_counter() - t0) * 1000, 2)


def service_state(request: Request) -> ServiceState:
    # a plain def: FastAPI runs it in the thread pool, so opening a new index version never blocks the event loop
    return request.app.state.service.pinned()


#: an endpoint parameter annotated ``Service`` receives the app's ServiceState, pinned to one index version
Service = Annotated[ServiceState, Depends(service_state)]
