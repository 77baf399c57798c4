"""`polyvse serve`: a FastAPI service + web page over a model and the photo index it built."""
from .app import ServeSettings, create_app

__all__ = ["ServeSettings", "create_app", "build_app"]


def build_app(index_path, checkpoint=None, captions_path=None, captions_lang=None, settings=None, device="auto"):
    """Open the index, load its model on ``device`` (refusing a mismatch), embed the caption collection once,
    make the app.

    Returns (app, searcher, captions or None).
    """
    from polyvse.index import CaptionCollection, PhotoIndex, Searcher, model_for_index, read_caption_file

    index = PhotoIndex.open(index_path)
    model, _ = model_for_index(index, checkpoint, device=device)
    searcher = Searcher(model, index)
    captions = None
    if captions_path:
        captions = CaptionCollection(searcher, read_caption_file(captions_path, captions_lang),
                                     source=str(captions_path))
    return create_app(searcher, captions, settings), searcher, captions
