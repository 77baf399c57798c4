"""Search your own photos from Python: index a folder of photos with a trained model, then search it by text.

    python examples/search_your_photos.py --checkpoint runs/demo/checkpoint --photos my_photos/ \
        --query "zwei Hunde spielen im Schnee" --lang de

The index is a folder (default my_index/) that `polyvse search --index my_index ...` and `polyvse serve --index
my_index` open too. Photo features are cached, so indexing the folder again after adding photos only runs the new
ones through the backbone.
"""

from __future__ import annotations

import argparse

import polyvse
from polyvse.data.user_files import photo_source
from polyvse.index import PhotoIndex, Searcher, build_index
from polyvse.util.paths import cache_root


def main(argv: list[str] | None = None) -> list:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", required=True, help="a trained model (runs/demo/checkpoint after `make demo`)")
    ap.add_argument("--photos", required=True, help="folder of photos, searched recursively")
    ap.add_argument("--index", default="my_index", help="where to write the index (default %(default)s)")
    ap.add_argument("--query", required=True, help="what the photo shows")
    ap.add_argument("--lang", default="en", help="the query's language, an ISO 639 code (default %(default)s)")
    ap.add_argument("-k", type=int, default=5, help="how many photos to show")
    args = ap.parse_args(argv)

    model = polyvse.load(args.checkpoint)
    photos, folder = photo_source(args.photos, None)
    names = [p.relative_to(folder).as_posix() for p in photos]
    # the index records which model built it: a search with another model is refused, not silently wrong
    report = build_index(
        model,
        photos,
        args.index,
        names=names,
        checkpoint_path=args.checkpoint,
        cache_dir=cache_root() / "features",
        overwrite=True,
        progress=False,
    )
    print(f"indexed {report.added} photos into {args.index} ({len(report.failures)} unreadable)")

    searcher = Searcher(model, PhotoIndex.open(args.index))
    result = searcher.text(args.query, args.lang, k=args.k)
    print(f"{args.query!r} ({result.lang}):")
    for hit in result.hits:
        print(f"  {hit.rank}. {hit.score:.3f}  {hit.name}")
    return result.hits


if __name__ == "__main__":
    main()
