"""GET /api/health (liveness + sizes) and GET /api/model (languages, similarity, index and limits).
Cheap: they run on the event loop (async; their Service dependency, which may open a new index version, runs
in the thread pool like the other endpoints)."""

from __future__ import annotations

from fastapi import APIRouter

from polyvse import __version__
from polyvse.index.fingerprint import short

from ..schemas import Health
from ..state import Service

router = APIRouter(prefix="/api", tags=["service"])


@router.get("/health", response_model=Health)
async def health(service: Service):
    captions = service.captions
    return {
        "status": "ok",
        "photos": service.index.count,
        "captions": len(captions) if captions else 0,
        "generation": service.index.manifest.get("generation", 0),
    }


@router.get("/model")
async def model_info(service: Service):
    from polyvse.languages import language_name

    index, model, captions = service.index, service.model, service.captions
    served = service.searcher.served_languages  # trained, adapted, then zero-shot: every code the lang field takes
    m = index.manifest
    return {
        "polyvse_version": __version__,
        "languages": model.languages,
        "served_languages": [{"code": c, "name": language_name(c), "status": st} for c, st in served.items()],
        "language_names": {c: language_name(c) for c in served},
        "similarity": service.searcher.similarity,
        "embed_dim": model.embed_dim,
        "backbone": model.checkpoint.backbone,
        "fingerprint": index.fingerprint,
        "fingerprint_short": short(index.fingerprint),
        "index": {
            "photos": index.count,
            "kind": index.kind,
            "generation": m.get("generation", 0),
            "recall_target": m["search"].get("recall_target"),
            "measured_recall": m["search"].get("measured_recall"),
            "description": index.describe(),
        },
        "captions": ({"count": len(captions), "languages": captions.languages} if captions else None),
        "limits": service.settings.limits(),
    }
