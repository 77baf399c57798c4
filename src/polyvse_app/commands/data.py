"""`polyvse data list | fetch | export`: see, get and dump the corpora.

Data root: --data-root DIR, else $POLYVSE_DATA, else ~/.cache/polyvse.
"""

from __future__ import annotations

import argparse
import os
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "data",
        help="list, fetch and export datasets",
        description="List, fetch and export datasets. Data root: --data-root, else "
        "$POLYVSE_DATA, else ~/.cache/polyvse.",
    )
    sub = p.add_subparsers(dest="data_command", required=True)

    ls = sub.add_parser("list", help="list the datasets polyvse can load")
    ls.set_defaults(func=_list)

    fe = sub.add_parser("fetch", help="download a corpus (or copy it from a local mirror) into the data root")
    fe.add_argument("name", help="multi30k, flickr8k, flickr8kcn, muse, sts or all")
    fe.add_argument(
        "--from",
        dest="source_dir",
        metavar="DIR",
        help="copy from a local mirror of the public layout (e.g. ../shared/data) instead of downloading",
    )
    fe.add_argument("--data-root", metavar="DIR", help="data root (default $POLYVSE_DATA or ~/.cache/polyvse)")
    fe.add_argument("--force", action="store_true", help="download again files that are already present")
    fe.add_argument("--quiet", action="store_true", help="no progress bars")
    fe.set_defaults(func=_fetch)

    ex = sub.add_parser("export", help="write a dataset split as JSON Lines (image, lang, caption, source, split)")
    ex.add_argument("--dataset", default=None, help="dataset name (default f8k-ml; see `polyvse data list`)")
    ex.add_argument("--split", default="all", help="train, val, test (or all; default all)")
    ex.add_argument("--out", default="-", metavar="FILE", help="output file, or - for standard output (default)")
    ex.add_argument("--data-root", metavar="DIR", help="data root (default $POLYVSE_DATA or ~/.cache/polyvse)")
    ex.add_argument(
        "--opt",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="dataset option, repeatable (e.g. --opt images=DIR --opt captions=FILE for generic)",
    )
    ex.set_defaults(func=_export)

    pa = sub.add_parser(
        "parallel",
        help="write a parallel file for `polyvse adapt` from MultiScript30k lines, "
        "with every evaluation photo and sentence left out",
    )
    pa.add_argument("--lang", required=True, help="the new language: es, ar, zh, qu or gn")
    pa.add_argument("--pivot", default="en", help="the counterpart's language: en, de, fr or cs (default en)")
    pa.add_argument(
        "--lines", type=int, help="write at most N pairs (a seeded shuffle: smaller files are nested in larger ones)"
    )
    pa.add_argument("--splits", default="train", help="Multi30K task1 splits to take lines from (default train)")
    pa.add_argument("--seed", type=int, default=0, help="shuffle seed (default 0)")
    pa.add_argument("--out", required=True, metavar="FILE", help="output file: .tsv or .jsonl (optionally .gz)")
    pa.add_argument("--data-root", metavar="DIR", help="data root (default $POLYVSE_DATA or ~/.cache/polyvse)")
    pa.set_defaults(func=_parallel)


def _list(args: argparse.Namespace) -> int:
    from polyvse.data.registry import list_datasets

    rows = list_datasets()
    width = max(len(n) for n, _ in rows)
    for name, desc in rows:
        print(f"{name:<{width}}  {desc}")
    return 0


def _fetch(args: argparse.Namespace) -> int:
    from polyvse.data.fetch import fetch
    from polyvse.util.paths import data_root

    root = data_root(args.data_root)
    result = fetch(args.name, root, source_dir=args.source_dir, progress=not args.quiet, force=args.force)
    print(f"{result.summary()} (data root {root})", file=sys.stderr)
    return 0


def _export(args: argparse.Namespace) -> int:
    from polyvse.data.export import export_jsonl
    from polyvse.data.registry import DEFAULT_DATASET, load_dataset, parse_options
    from polyvse.util.paths import data_root

    name = args.dataset or DEFAULT_DATASET
    opts = parse_options(name, args.opt)
    corpus = load_dataset(name, data_root(args.data_root), **opts)
    problems = getattr(corpus, "problems", None) or []
    for problem in problems:  # generic datasets: the lines that were skipped, and why
        print(f"polyvse: skipped: {problem}", file=sys.stderr)
    try:
        n = export_jsonl(corpus, args.out, split=args.split)
    except BrokenPipeError:  # `polyvse data export ... | head`: the reader left; that is fine
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    if args.out != "-":
        print(f"wrote {n} captions of {name} ({args.split}) to {args.out}", file=sys.stderr)
    return 0


def _parallel(args: argparse.Namespace) -> int:
    from polyvse.adaptation.multiscript_lines import write_multiscript_parallel
    from polyvse.errors import DataError
    from polyvse.util.paths import data_root

    if args.lines is not None and args.lines < 1:
        raise DataError(f"--lines must be at least 1, got {args.lines}")
    splits = [s.strip() for s in args.splits.split(",") if s.strip()]
    done = write_multiscript_parallel(
        data_root(args.data_root), args.lang, args.out, args.pivot, args.lines, splits, args.seed
    )
    print(
        f"wrote {done['written']} of {done['available']} {args.lang}-{args.pivot} pairs outside the evaluations "
        f"to {done['file']}",
        file=sys.stderr,
    )
    return 0
