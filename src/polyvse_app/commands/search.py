"""`polyvse search --index INDEX ("QUERY" --lang L | --image PHOTO | --similar-to ID) [-k N] [--json]`.

Prints the ranked photos with their scores. ``--lang`` takes any ISO 639 code the model serves (trained, adapted,
or read zero-shot by its frozen towers); another is refused with how to teach it (``polyvse adapt``). ``--lang auto``
detects the query's language, or refuses (exit code 2) with a message saying why (polyvse.text.langid).
"""

from __future__ import annotations

import json
import os
import sys

from polyvse.util.paths import DEFAULT_INDEX

from .shared import add_device_args

_THREAD_SETTINGS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def register(sub) -> None:
    p = sub.add_parser(
        "search",
        help="search an index by text or by photo",
        description="Search a photo index by a text query (in any of the model's languages), by a photo, or "
        "by an indexed photo's id. The model is the checkpoint recorded in the index unless --checkpoint is "
        "given; a model other than the one that built the index is refused.",
    )
    p.add_argument("query", nargs="?", help='text query, e.g. "zwei Hunde spielen im Schnee"')
    p.add_argument(
        "--index",
        default=str(DEFAULT_INDEX),
        metavar="INDEX",
        help="index folder (from `polyvse index build`; default: %(default)s, from `make model`)",
    )
    p.add_argument("--checkpoint", metavar="DIR", help="checkpoint folder (default: the one recorded in the index)")
    p.add_argument(
        "--lang",
        help="language of the text query: an ISO 639 code the model serves (e.g. en, es, spa, "
        "zh-Hans; trained, adapted or zero-shot), or auto",
    )
    p.add_argument("--image", metavar="PHOTO", help="search by this photo instead of text")
    p.add_argument("--similar-to", type=int, metavar="ID", help="search by an indexed photo (its id)")
    p.add_argument("-k", type=int, default=10, help="number of results (default: %(default)s)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    add_device_args(p)
    p.set_defaults(func=run)


def _print_hits(hits, header: str) -> None:
    print(header)
    if not hits:
        print("  (no photos)")
        return
    width = max(len(h.name) for h in hits)
    print(f"{'rank':>4}  {'score':>7}  {'id':>6}  photo")
    for h in hits:
        print(f"{h.rank:>4}  {h.score:7.4f}  {h.id:>6}  {h.name:<{width}}  {h.path}")


def one_math_thread() -> None:
    """Search by text or by id with one BLAS / OpenMP thread: the work is a few small matrix-vector products
    and one query's scan, which thread pools only slow down (their start-up, and contention on a busy machine:
    ~0.15 s of a 1.3 s search on 2 cores). Only a fresh process, before numpy and faiss load, can still set
    it; settings already in the environment are kept. Not for --image: the photo backbone uses the threads."""
    if "numpy" in sys.modules:  # a caller inside Python (tests, scripts) keeps its own threads
        return
    for name in _THREAD_SETTINGS:
        os.environ.setdefault(name, "1")


def run(args) -> int:
    if args.image is None:
        one_math_thread()
    from polyvse.errors import DataError
    from polyvse.index import PhotoIndex, Searcher, model_for_index
    from polyvse.languages import serving_status

    modes = [
        m
        for m, v in (("a text query", args.query), ("--image", args.image), ("--similar-to", args.similar_to))
        if v is not None
    ]
    if len(modes) != 1:
        raise DataError(
            "give exactly one of: a text query (with --lang), --image PHOTO or --similar-to ID"
            + (f"; got {' and '.join(modes)}" if modes else "")
        )
    if args.query is not None and not args.lang:
        raise DataError("a text query needs --lang (an ISO 639 code such as en, de or es, or auto to detect it)")
    if args.query is None and args.lang:
        raise DataError("--lang is for text queries only")
    index = PhotoIndex.open(args.index)
    # a text query of a word-level model runs in numpy: no torch to import (seconds of start-up)
    model, _ = model_for_index(index, args.checkpoint, device=args.device, text_only=args.query is not None)
    searcher = Searcher(model, index)

    if args.query is not None:
        result = searcher.text(args.query, args.lang, k=args.k)
        if args.json:
            print(
                json.dumps(
                    {
                        "query": result.query,
                        "lang": result.lang,
                        "detected": result.detected.to_dict() if result.detected else None,
                        "unknown_words": result.unknown_words,
                        "results": [h.to_dict(with_path=True) for h in result.hits],
                    },
                    ensure_ascii=False,
                    indent=2,
                )
            )
            return 0
        # this language's status only: the whole served list would canonicalise every tower's documented codes
        status = serving_status(searcher.model, result.lang) or "trained"
        how = result.lang if status == "trained" else f"{result.lang}, {status}"
        if result.detected and result.detected.decided_by == "same answer":
            how = (
                f"{how}; language unclear, but every plausible one gives {result.detected.agreement:.0%} the "
                "same photos"
            )
        elif result.detected and result.detected.decided_by == "plausible":
            others = ", ".join(c for c, _ in result.detected.candidates if c != result.lang)
            how = f"{how}; language unclear, searched as a plausible one" + (
                f" (also plausible: {others})" if others else ""
            )
        elif result.detected:
            how = f"detected {how}, confidence {result.detected.confidence:.2f}"
        header = f"{result.query!r} ({how}): top {len(result.hits)} of {index.count} photos"
        if result.unknown_words:
            header += f"\n  words not in the model's vocabulary (ignored as unknown): {', '.join(result.unknown_words)}"
        _print_hits(result.hits, header)
        return 0
    if args.image is not None:
        hits = searcher.image(args.image, k=args.k)
        header = f"photos like {args.image}: top {len(hits)} of {index.count}"
    else:
        hits = searcher.similar(args.similar_to, k=args.k)
        header = f"photos like #{args.similar_to} ({index.photo(args.similar_to).name}): top {len(hits)}"
    if args.json:
        print(json.dumps({"results": [h.to_dict(with_path=True) for h in hits]}, ensure_ascii=False, indent=2))
        return 0
    _print_hits(hits, header)
    return 0
