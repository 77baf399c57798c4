"""`polyvse serve --index INDEX [--checkpoint C] [--captions FILE] [--host H] [--port P] [--token T]`.

Starts the FastAPI service (uvicorn) with the web page at http://HOST:PORT/ and the OpenAPI schema at
/openapi.json. Binds to 127.0.0.1 unless --host says otherwise; another address wants a token, and is refused
without one unless --allow-unauthenticated says so (then with a loud warning). Photos added to the index while
it runs are searched without a restart (service/live.py).
"""

from __future__ import annotations

import os
import sys
import time

from polyvse.util.paths import DEFAULT_INDEX

from .shared import add_device_args


def register(sub) -> None:
    p = sub.add_parser(
        "serve",
        help="serve an index over HTTP: JSON API + a search page",
        description="Serve a photo index over HTTP: text -> photo, photo -> photo (upload) and photo -> caption "
        "(over --captions) as JSON endpoints, plus a web page with a query box, a language picker and "
        "drag-and-drop photo search.",
    )
    _add_content_args(p)
    _add_access_args(p)
    _add_runtime_args(p)
    add_device_args(p)
    p.set_defaults(func=run)


def _add_content_args(p) -> None:
    """What is served: the index, its model and a caption collection."""
    p.add_argument(
        "--index",
        default=str(DEFAULT_INDEX),
        metavar="INDEX",
        help="index folder (from `polyvse index build`; default: %(default)s, from `make model`)",
    )
    p.add_argument("--checkpoint", metavar="DIR", help="checkpoint folder (default: the one recorded in the index)")
    p.add_argument(
        "--captions",
        metavar="FILE",
        help="caption collection for photo -> caption: JSONL (e.g. from "
        "`polyvse data export`), CSV/TSV with a caption column, or plain text, one caption a line",
    )
    p.add_argument("--captions-lang", metavar="LANG", help="language of captions that do not name one")


def _add_access_args(p) -> None:
    """Who can reach the service and what a request may send: address, upload limits, token."""
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (default: %(default)s, this machine only; 0.0.0.0 serves the network: "
        "then a token is needed, or --allow-unauthenticated)",
    )
    p.add_argument("--port", type=int, default=8000, help="port (default: %(default)s)")
    p.add_argument(
        "--max-upload-mb",
        type=float,
        default=8.0,
        metavar="MB",
        help="largest accepted photo upload in MiB (default: %(default)s)",
    )
    p.add_argument(
        "--max-megapixels",
        type=float,
        default=40.0,
        metavar="MP",
        help="uploads with more pixels are refused before decoding (default: %(default)s)",
    )
    p.add_argument(
        "--token",
        default=os.environ.get("POLYVSE_TOKEN") or None,
        metavar="TOKEN",
        help="require `Authorization: Bearer TOKEN` on the API (the web page asks for it once); default: "
        "$POLYVSE_TOKEN, which keeps it out of the process list. Make one with "
        "python -c 'import secrets; print(secrets.token_urlsafe())'",
    )
    p.add_argument(
        "--allow-unauthenticated",
        action="store_true",
        help="with --host other than loopback and no token, serve anyway: every indexed photo goes to "
        "anyone who can reach the port (without this, such a start is refused)",
    )


def _add_runtime_args(p) -> None:
    """How the server runs: decoding, reloading the index, threads, warm-up and logging."""
    p.add_argument(
        "--decode-concurrency",
        type=int,
        default=os.cpu_count() or 1,
        metavar="N",
        help="photos decoded at once, for uploads and thumbnails; each may hold a --max-megapixels "
        "photo in memory (default: the number of cores, %(default)s)",
    )
    p.add_argument(
        "--reload-interval",
        type=float,
        default=1.0,
        metavar="S",
        help="how often the index folder is checked for photos added by `polyvse index add` (or a "
        "rebuild), picked up without a restart (default: %(default)s s)",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        metavar="N",
        help="torch/FAISS threads per computation (default: %(default)s; concurrent requests already use "
        "the cores, and more threads per tiny query mostly spin: 1 thread is ~5x less CPU per text query)",
    )
    p.add_argument(
        "--no-warm-up", action="store_true", help="skip loading the image backbone and language models before serving"
    )
    p.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])


def set_threads(n: int) -> None:
    import faiss

    from polyvse.features.onnx_encoder import set_threads as onnx_threads, torch_installed

    if torch_installed():  # the base install has none: photos go through ONNX Runtime
        import torch

        torch.set_num_threads(n)
    onnx_threads(n)
    faiss.omp_set_num_threads(n)


def warm_up(searcher, captions=None) -> float:
    """Load the image backbone and the language detector now, so the first requests are not slow."""
    from PIL import Image

    from polyvse.text.langid import warm_up as langid_warm_up

    t0 = time.time()
    searcher.embed_image(Image.new("RGB", (64, 64), (128, 128, 128)))
    searcher.embed_text("warm up", searcher.languages[0])
    langid_warm_up(searcher.languages)
    return time.time() - t0


def show_service_log(level: str) -> None:
    """The service's own messages (a new index version picked up, or one it cannot serve) beside uvicorn's."""
    import logging

    log = logging.getLogger("polyvse.serve")
    if not log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s:     %(message)s"))  # uvicorn's layout
        log.addHandler(handler)
        log.propagate = False
    log.setLevel(level.upper())


def exposure_warning(host: str, port: int, token: str | None) -> str | None:
    """What `polyvse serve` says before it binds an address other machines can reach (None for loopback)."""
    from ..service.auth import is_loopback

    if is_loopback(host):
        return None
    if token:
        return (
            f"note: --host {host} serves the API to the network over plain HTTP; the token guards it, but "
            "anyone on the path can read it: put a TLS proxy in front beyond a trusted network"
        )
    return (
        f"WARNING: --host {host} serves the API to the network WITHOUT authentication: anyone who can reach "
        f"port {port} can search and download every indexed photo (--allow-unauthenticated). Set POLYVSE_TOKEN "
        "(or pass --token) to require `Authorization: Bearer <token>`, or bind 127.0.0.1 (the default)"
    )


def run(args) -> int:
    import uvicorn

    from polyvse.errors import DataError

    from ..service import ServeSettings, build_app

    if not 0 < args.port < 65536:
        raise DataError(f"--port must be 1..65535, not {args.port}")
    if args.max_upload_mb <= 0 or args.max_megapixels <= 0:
        raise DataError("--max-upload-mb and --max-megapixels must be positive")
    if args.threads < 1 or args.decode_concurrency < 1:
        raise DataError(
            f"--threads and --decode-concurrency must be at least 1, not {args.threads} and {args.decode_concurrency}"
        )
    if not args.reload_interval >= 0:
        raise DataError(f"--reload-interval must be 0 or more seconds, not {args.reload_interval}")
    from ..service.auth import check_exposure, check_token

    if args.token is not None:
        try:
            check_token(args.token)
        except ValueError as exc:
            raise DataError(f"--token / POLYVSE_TOKEN: {exc}") from None
    try:  # before the index and model load: a refused start costs nothing
        check_exposure(args.host, args.token, args.allow_unauthenticated)
    except ValueError as exc:
        raise DataError(f"refusing to start: {exc}") from None
    set_threads(args.threads)
    show_service_log(args.log_level)
    settings = ServeSettings(
        max_upload_bytes=int(args.max_upload_mb * 1024 * 1024),
        max_pixels=int(args.max_megapixels * 1_000_000),
        decode_concurrency=args.decode_concurrency,
        reload_interval_s=args.reload_interval,
        token=args.token,
    )
    t0 = time.time()
    app, searcher, captions = build_app(
        args.index, args.checkpoint, args.captions, args.captions_lang, settings, device=args.device
    )
    print(f"index: {searcher.index.root} ({searcher.index.describe()})", flush=True)
    print(f"device: {searcher.model.device}", flush=True)
    print(f"model: languages {', '.join(searcher.languages)}; {searcher.similarity} similarity", flush=True)
    if captions is not None:
        print(
            f"captions: {len(captions)} from {args.captions} ({', '.join(captions.languages)}) embedded"
            + (f"; {captions.dropped} in other languages skipped" if captions.dropped else ""),
            flush=True,
        )
    if not args.no_warm_up:
        print(f"warmed up in {warm_up(searcher, captions):.1f} s", flush=True)
    warning = exposure_warning(args.host, args.port, args.token)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    print(
        f"ready in {time.time() - t0:.1f} s: http://{args.host}:{args.port}/  (API schema: /openapi.json)"
        + ("; the API wants the token" if args.token else ""),
        flush=True,
    )
    # keep-alive above the usual client pool expiry (httpx: 5 s), so idle connections are closed by clients first
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, timeout_keep_alive=15)
    return 0
