"""`polyvse demo`: the quick start in one command. F8K-ML -> features (cached) -> shared-GRU model -> checkpoint ->
evaluation, then an index of the demo's photos (<out>/index), one search of it, and the `polyvse search` and
`polyvse serve` commands to run next."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import time
from pathlib import Path

from .train import add_common, apply_overrides, run_training

#: the search the demo shows: German, one of the demo model's five languages, in words its vocabulary holds
DEMO_QUERY = ("zwei Hunde spielen im Schnee", "de")


def register(sub) -> None:
    p = sub.add_parser(
        "demo",
        help="train and evaluate the demo model on F8K-ML (en, de, fr, cs, zh), index its photos and search them",
        description="Train and evaluate the demo model on F8K-ML (en, de, fr, cs, zh), index the "
        "photos (<out>/index), show one search, and print the commands to search and "
        "serve the index.",
    )
    p.add_argument("--out", default="runs/demo", help="output folder (default runs/demo)")
    p.add_argument(
        "--images", metavar="DIR", help="photos to index (default: <data root>/flickr8k/images, the demo's own 850)"
    )
    p.add_argument("--no-index", dest="index", action="store_false", help="train and evaluate only")
    add_common(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from polyvse.util.paths import data_root
    from polyvse_train.config import TrainConfig

    out = Path(args.out)
    started = time.time()
    code = run_training(apply_overrides(TrainConfig(name="demo"), args), args, out)
    # a run stopped early (--max-steps) writes no metrics.json: nothing to index yet
    metrics = out / "metrics.json"
    if code or not args.index or not metrics.is_file() or metrics.stat().st_mtime < started:
        return code
    images = Path(args.images) if args.images else data_root(args.data_root) / "flickr8k" / "images"
    index = out / "index"
    build = [
        "index",
        "build",
        "--checkpoint",
        str(out / "checkpoint"),
        "--images",
        str(images),
        "--out",
        str(index),
        "--force",
        "--device",
        args.device,
    ]
    if args.data_root:  # the training's feature cache: its photo features are read back, not recomputed
        build += ["--data-root", args.data_root]
    query, lang = DEMO_QUERY
    search = ["search", "--index", str(index), query, "--lang", lang, "-k", "5"]
    print(f"\nindexing the photos: {_shown(build)}")
    code = _polyvse(build + (["--quiet"] if args.quiet else []))
    if code:
        return code
    print(f"\none search of it: {_shown(search)}\n")
    code = _polyvse(search)
    print(
        "\nnext, search it in any of the model's languages (en, de, fr, cs, zh), by photo, or serve it:\n"
        f"  {_shown(search[:3] + ['un chien court sur la plage', '--lang', 'fr'])}\n"
        f"  {_shown(search[:3] + ['--image', str(_first_photo(images))])}\n"
        f"  {_shown(['serve', '--index', str(index)])}    # http://127.0.0.1:8000/ : a search page and the JSON API"
    )
    return code


def _polyvse(argv: list[str]) -> int:
    """Run `polyvse ARGV` as the command line would (its errors included), in a child process: the commands
    package sits below the CLI that registers it, so it does not import the CLI back."""
    import subprocess

    done = subprocess.run([sys.executable, "-m", "polyvse_app", *argv], check=False, capture_output=True, text=True)
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    return done.returncode


def _program() -> str:
    """How to call polyvse from here: `polyvse` when that is on PATH and is this one, else this program's path
    (`.venv/bin/polyvse` after `make demo`, whose venv is not activated)."""
    me = Path(sys.argv[0])
    if me.name != "polyvse":  # python -m polyvse_app, or a test
        return "polyvse"
    found = shutil.which("polyvse")
    if found and Path(found).resolve() == me.resolve():
        return "polyvse"
    try:
        return os.path.relpath(me)
    except ValueError:  # another drive
        return str(me)


def _shown(argv: list[str]) -> str:
    return shlex.join([_program(), *argv])


def _first_photo(images: Path) -> Path:
    from polyvse.data.user_files import photo_source

    return photo_source(str(images), None)[0][0]
