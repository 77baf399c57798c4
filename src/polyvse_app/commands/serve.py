"""`polyvse serve --index INDEX [--checkpoint C] [--captions FILE] [--host H] [--port P]`.

Starts the FastAPI service (uvicorn) with the web page at http://HOST:PORT/ and the OpenAPI schema at
/openapi.json. Binds to 127.0.0.1 unless --host says otherwise.
"""
from __future__ import annotations

import time

from polyvse.paths import DEFAULT_INDEX

from .device_args import add_device_args


def register(sub) -> None:
    p = sub.add_parser(
        "serve", help="serve an index over HTTP: JSON API + a search page",
        description="Serve a photo index over HTTP: text -> photo, photo -> photo (upload) and photo -> caption "
        "(over --captions) as JSON endpoints, plus a web page with a query box, a language picker and "
        "drag-and-drop photo search.")
    p.add_argument("--index", default=str(DEFAULT_INDEX), metavar="INDEX",
                   help="index folder (from `polyvse index build`; default: %(default)s, from `make model`)")
    p.add_argument("--checkpoint", metavar="DIR", help="checkpoint folder (default: the one recorded in the index)")
    p.add_argument("--captions", metavar="FILE", help="caption collection for photo -> caption: JSONL (e.g. from "
                   "`polyvse data export`), CSV/TSV with a caption column, or plain text, one caption a line")
    p.add_argument("--captions-lang", metavar="LANG", help="language of captions that do not name one")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: %(default)s)")
    p.add_argument("--port", type=int, default=8000, help="port (default: %(default)s)")
    p.add_argument("--max-upload-mb", type=float, default=8.0, metavar="MB",
                   help="largest accepted request body in MiB (default: %(default)s)")
    p.add_argument("--max-megapixels", type=float, default=40.0, metavar="MP",
                   help="uploads with more pixels are refused before decoding (default: %(default)s)")
    p.add_argument("--threads", type=int, default=1, metavar="N",
                   help="torch/FAISS threads per computation (default: %(default)s; concurrent requests already use "
                   "the cores, and more threads per tiny query mostly spin: 1 thread is ~5x less CPU per text query)")
    p.add_argument("--no-warm-up", action="store_true",
                   help="skip loading the image backbone and language models before serving")
    p.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    add_device_args(p)
    p.set_defaults(func=run)


def set_threads(n: int) -> None:
    import faiss
    import torch

    torch.set_num_threads(n)
    faiss.omp_set_num_threads(n)


def warm_up(searcher, captions=None) -> float:
    """Load the image backbone and the language detector now, so the first requests are not slow."""
    from PIL import Image

    from polyvse.langid import warm_up as langid_warm_up

    t0 = time.time()
    searcher.embed_image(Image.new("RGB", (64, 64), (128, 128, 128)))
    searcher.embed_text("warm up", searcher.languages[0])
    langid_warm_up(searcher.languages)
    return time.time() - t0


def run(args) -> int:
    import uvicorn

    from polyvse.errors import DataError

    from ..service import ServeSettings, build_app

    if not 0 < args.port < 65536:
        raise DataError(f"--port must be 1..65535, not {args.port}")
    if args.max_upload_mb <= 0 or args.max_megapixels <= 0:
        raise DataError("--max-upload-mb and --max-megapixels must be positive")
    if args.threads < 1:
        raise DataError(f"--threads must be at least 1, not {args.threads}")
    set_threads(args.threads)
    settings = ServeSettings(max_upload_bytes=int(args.max_upload_mb * 1024 * 1024),
                             max_pixels=int(args.max_megapixels * 1_000_000))
    t0 = time.time()
    app, searcher, captions = build_app(args.index, args.checkpoint, args.captions, args.captions_lang, settings,
                                        device=args.device)
    print(f"index: {searcher.index.root} ({searcher.index.describe()})", flush=True)
    print(f"device: {searcher.model.device}", flush=True)
    print(f"model: languages {', '.join(searcher.languages)}; {searcher.similarity} similarity", flush=True)
    if captions is not None:
        print(f"captions: {len(captions)} from {args.captions} ({', '.join(captions.languages)}) embedded"
              + (f"; {captions.dropped} in other languages skipped" if captions.dropped else ""), flush=True)
    if not args.no_warm_up:
        print(f"warmed up in {warm_up(searcher, captions):.1f} s", flush=True)
    print(f"ready in {time.time() - t0:.1f} s: http://{args.host}:{args.port}/  (API schema: /openapi.json)",
          flush=True)
    # keep-alive above the usual client pool expiry (httpx: 5 s), so idle connections are closed by clients first
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, timeout_keep_alive=15)
    return 0
