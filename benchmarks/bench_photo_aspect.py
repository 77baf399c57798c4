"""How a model trained on squashed photos (f8k-full) retrieves photos at their own aspect ratio.

    python benchmarks/bench_photo_aspect.py --checkpoint runs/model/checkpoint --split val \
        --out benchmarks/results/photo_aspect.json [--data-root DIR]

f8k-full's photos are 224x224 squashes of the full frame; a user's photos keep their aspect ratio. The photos of
`flickr8k/images/` (850, original size) are also in f8k-full, so the same photos and captions can be scored three
ways: the squashed files the model trained on (its training form), the originals with the aspect kept and a
centre crop (squash off), and the originals squashed to a square before the crop (squash on: what `polyvse.load`
does for a model trained on squashed photos). Galleries: the photos of the chosen split of the official Flickr8K
split (f8k-ml's val 96 / test 125 photos), every caption of each language. Not a test; small galleries, so
read differences of ~1 mR as noise.

Most of these "originals" are thumbnails (longest side 200 px for 562 of the 850; 500 px, Flickr8K's own size, for
279), while the 224x224 files were squashed from full-size photos: a 200-px photo upsampled to the backbone's
crop has less detail than the training form. So every variant is also scored on the photos at Flickr8K's full
size only (longest side >= 450 px: val 31, test 37 photos), which is closer to what users give.
"""

from __future__ import annotations

import argparse
import platform
import time
from collections import Counter
from pathlib import Path

from PIL import Image

import polyvse
from polyvse.data.registry import load_dataset
from polyvse.evaluation.retrieval import RetrievalEvaluator
from polyvse.features.backbones import get_extractor
from polyvse.util.atomic import write_json_atomic
from polyvse.util.paths import cache_root, data_root

FULL_SIZE = 450  # px, longest side: Flickr8K's photos are 500 px; the thumbnails among the 850 are 200


def _mean(values) -> float:
    values = list(values)
    return round(sum(values) / len(values), 2)


def longest_sides(corpus) -> dict[str, int]:
    """Longest side in pixels of every photo (read from the file headers)."""
    return {pid: max(Image.open(p.path).size) for pid, p in corpus.photos.items()}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", type=Path, help="checkpoint folder (required unless --sizes-only)")
    ap.add_argument("--split", default="val", choices=["val", "test"])
    ap.add_argument("--out", type=Path, help="JSON file to write the results to (required unless --sizes-only)")
    ap.add_argument("--data-root", default=None)
    ap.add_argument(
        "--sizes-only", action="store_true", help="only count the 850 originals by longest side (no checkpoint needed)"
    )
    args = ap.parse_args(argv)

    root = data_root(args.data_root)
    originals = load_dataset("f8k-ml", root)
    longest = longest_sides(originals)
    sizes = dict(sorted(Counter(longest.values()).items()))
    print(f"{len(longest)} originals by longest side (px: photos): {sizes}")
    if args.sizes_only:
        return {"originals_by_longest_side": sizes}
    if args.checkpoint is None or args.out is None:
        ap.error("--checkpoint and --out are required unless --sizes-only")
    cache = cache_root() / "features"
    model = polyvse.load(args.checkpoint, device="cpu")
    ids = {c.photo_id for c in originals.captions if c.split == args.split}
    squashed_files = load_dataset("f8k-full", root).filter(photo_ids=ids)
    ck = model.checkpoint

    full_size = {pid for pid in ids if longest[pid] >= FULL_SIZE}

    def run(corpus, squash: bool) -> dict:
        model._extractor = get_extractor(ck.backbone, ten_crop=ck.ten_crop, squash=squash)
        t = time.time()
        res = RetrievalEvaluator.on_corpus(corpus, cache, split=args.split, progress=False)(model)
        per = {lang: round(m["mr"], 2) for lang, m in res["languages"].items()}
        return {
            "mr": per,
            "mean_mr": _mean(per.values()),
            "photos": {lang: m["n_images"] for lang, m in res["languages"].items()},
            "seconds": round(time.time() - t, 1),
        }

    def variants(photo_ids: set[str]) -> dict:
        return {
            "training form (the squashed 224x224 files)": run(squashed_files.filter(photo_ids=photo_ids), False),
            "original photo, aspect kept, centre crop (squash off)": run(originals.filter(photo_ids=photo_ids), False),
            "original photo squashed to a square (squash on)": run(originals.filter(photo_ids=photo_ids), True),
        }

    every, full = variants(ids), variants(full_size)
    out = {
        "checkpoint": str(args.checkpoint),
        "trained_on_squashed_photos": ck.squash_photos,
        "split": args.split,
        "backbone": ck.backbone,
        "originals_by_longest_side": sizes,
        "variants": every,
        f"variants_full_size_photos (longest side >= {FULL_SIZE} px)": full,
        "machine": f"{platform.processor() or platform.machine()}, {platform.system()}",
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    from polyvse.provenance import provenance

    out["provenance"] = provenance(model=args.checkpoint)
    for label, group in ((f"all {len(ids)} photos", every), (f"{len(full_size)} full-size photos", full)):
        print(label)
        for name, v in group.items():
            print(f"  {name:56s} mean mR {v['mean_mr']:5.1f}  " + "  ".join(f"{k} {x:.1f}" for k, x in v["mr"].items()))
    write_json_atomic(args.out, out)
    return out


if __name__ == "__main__":
    main()
