"""One APIRouter per concept, in the order create_app includes them: meta (health, model), search, captions,
photos, page (the web page)."""

from . import captions, meta, page, photos, search

ROUTERS = [meta.router, search.router, captions.router, photos.router, page.router]
