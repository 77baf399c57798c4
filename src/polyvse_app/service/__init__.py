"""`polyvse serve`: a FastAPI service + web page over a model and the photo index it built (app.py)."""

from .app import build_app, create_app
from .settings import ServeSettings

__all__ = ["ServeSettings", "build_app", "create_app"]
