"""`polyvse features extract (--images DIR | --list FILE) [--backbone B] [--ten-crop] [--squash] [--strict] ...`.

Computes image features into the content-addressed cache (default ``<data root>/cache/features``)
that training and evaluation read, so a later run repeats no work. Under ``torchrun`` every rank extracts
its own contiguous slice of the sorted photo list (``--shard K/N`` does the same for an independent job).
"""

from __future__ import annotations

from pathlib import Path

from polyvse.data.user_files import IMAGE_SUFFIXES
from polyvse.util.paths import cache_root

from .shared import add_device_args, device_of, print_failures, workers_of


def register(sub) -> None:
    p = sub.add_parser("features", help="compute and cache image features")
    actions = p.add_subparsers(dest="features_command", required=True)
    _add_extract(actions)
    _add_embed_text(actions)
    b = actions.add_parser("backbones", help="list the available image backbones")
    b.set_defaults(func=run_backbones)


def _add_extract(actions) -> None:
    """`polyvse features extract`: CNN features of photos into the feature cache."""
    e = actions.add_parser(
        "extract",
        help="extract CNN features for photos into the feature cache",
        description="Extract CNN features for photos into the feature cache. Photos that cannot be read "
        "are reported and skipped (or stop the run with --strict); already cached photos are not recomputed.",
    )
    src = e.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--images",
        metavar="DIR",
        help="folder of photos (searched recursively for " + ", ".join(sorted(IMAGE_SUFFIXES)) + ")",
    )
    src.add_argument(
        "--list",
        metavar="FILE",
        help="text file with one photo path per line (relative paths are "
        "relative to the list file's folder; blank lines and lines starting with # are ignored)",
    )
    e.add_argument(
        "--backbone",
        default=None,
        help="image backbone (default: efficientnet-lite0; see `polyvse features backbones`)",
    )
    e.add_argument("--ten-crop", action="store_true", help="average features over 10 crops (10x slower)")
    e.add_argument(
        "--squash",
        action="store_true",
        help="resize photos to a square ignoring their aspect ratio, as models trained on squashed "
        "photos (f8k-full) see them; their index build and search read these features",
    )
    e.add_argument("--strict", action="store_true", help="stop at the first unreadable photo instead of skipping it")
    e.add_argument(
        "--cache-dir",
        metavar="DIR",
        help="feature cache folder (default: $POLYVSE_CACHE/features, else <data root>/cache/features)",
    )
    e.add_argument("--data-root", metavar="DIR", help="data root (default: $POLYVSE_DATA, else ~/.cache/polyvse)")
    e.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="photo decoding processes (0 = decode in the main process; default: on CPU up to 2, on a GPU "
        "every core but one, at most 16). On a quiet 2-core machine they change little (~37 photos/s "
        "either way); they help when decoding is slow (large photos, slow disk), the machine is "
        "shared, or a GPU runs the network",
    )
    e.add_argument("--batch-size", type=int, default=32, metavar="N", help="photos per batch (default: %(default)s)")
    e.add_argument("--quiet", action="store_true", help="no progress bars")
    add_device_args(e)  # features are fp32 only: the cache training reads, on a CPU or a GPU alike
    e.add_argument(
        "--shard",
        metavar="K/N",
        help="extract only shard K of N of the sorted photo list, as an "
        "independent job (under torchrun every rank takes its own shard without this)",
    )
    e.set_defaults(func=run_extract)


def _add_embed_text(actions) -> None:
    """`polyvse features embed-text`: a dataset's captions into the sentence-embedding cache."""
    t = actions.add_parser(
        "embed-text",
        help="fill the sentence-embedding cache of a frozen text tower for a whole dataset",
        description="Embed every caption of a dataset with a frozen sentence encoder into the content-keyed "
        "cache <cache root>/sentences that training reads: evaluation split first, then the first caption of "
        "every training photo and language, the validation split, then the remaining training captions rank by "
        "rank. Resumable: a stopped run loses at most one shard; rerun the same command to continue.",
    )
    t.add_argument("--dataset", default="f8k-full", help="dataset name (default: %(default)s)")
    t.add_argument(
        "--encoder",
        default="e5-small",
        help="frozen sentence encoder (e5-small, use-multilingual), or "
        "fused towers joined by + (e5-small+use-multilingual: each tower in turn)",
    )
    t.add_argument("--langs", default="en,de,fr,cs,zh", help="comma-separated languages (default: %(default)s)")
    t.add_argument(
        "--source",
        default="",
        help="only captions of this source (e.g. multi30k-task1: the parallel "
        "lines a teacher term reads from a -text corpus); default: every caption",
    )
    t.add_argument(
        "--text-tail-layers",
        type=int,
        default=0,
        metavar="K",
        help="for a model that fine-tunes e5's last K layers (model.text_finetune_layers, as "
        "polyvse-best does): fill e5's cache of the hidden states entering them, which such a model "
        "reads, instead of e5's sentence vectors (other towers fill theirs as usual)",
    )
    t.add_argument("--data-root", metavar="DIR", help="data root (default: $POLYVSE_DATA, else ~/.cache/polyvse)")
    t.set_defaults(func=run_embed_text)


def run_extract(args) -> int:
    from ..shard_role import run_with_shard_role

    device = device_of(args)  # before the process group: a GPU rank's group is NCCL on its own GPU
    return run_with_shard_role(getattr(args, "shard", None), lambda role: _extract(args, role, device), device)


def _extract(args, role, device) -> int:
    """Extract the photos of this process's shard (all of them when the collection is not sharded).

    Shards need no merge step: the feature cache is keyed by photo content, so every shard's vectors land in
    the one cache (or, on machines without a shared folder, in caches that can be copied together).
    """
    from polyvse.data.user_files import photo_source
    from polyvse.errors import DataError
    from polyvse.features.backbones import available_backbones, get_extractor
    from polyvse.features.cache import extract_features

    from ..shard_role import run_shard

    workers = workers_of(args, device)
    if args.batch_size < 1:
        raise DataError(f"--batch-size must be at least 1, not {args.batch_size}")
    photos, _ = photo_source(args.images, args.list)

    cache_dir = Path(args.cache_dir).expanduser() if args.cache_dir else cache_root(args.data_root) / "features"
    extractor = get_extractor(args.backbone or available_backbones()[0], ten_crop=args.ten_crop, squash=args.squash)
    extractor.to(device)
    start, stop = role.bounds(len(photos))

    def work() -> dict:
        result = extract_features(
            photos[start:stop],
            extractor,
            cache_dir,
            strict=args.strict,
            batch_size=args.batch_size,
            num_workers=workers,
            progress=not args.quiet and (role.is_main or role.independent),
        )
        return {"extracted": result.extracted, "cached": result.cached, "failures": result.failures}

    shards = run_shard(role, work)
    if not role.is_main and not role.independent:
        return 0  # rank 0 reports for every rank
    extracted = sum(s["extracted"] for s in shards)
    cached = sum(s["cached"] for s in shards)
    failures = [f for s in shards for f in s["failures"]]
    where = ""
    if role.independent:
        where = (
            f"{role.label} (photos {start + 1}-{stop} of {len(photos)}): "
            if stop > start
            else f"{role.label} (no photos: {len(photos)} photos for {role.num_shards} shards): "
        )
    elif role.sharded:
        where = f"{role.num_shards} ranks: "
    print(
        f"{where}{stop - start if role.independent else len(photos)} photos: {extracted} extracted, "
        f"{cached} already cached, {len(failures)} failed"
    )
    print(
        f"features: {extractor.name} ({extractor.dim}-d{', ten-crop' if extractor.ten_crop else ''}"
        f"{', squashed' if args.squash else ''}) "
        f"in {cache_dir / extractor.cache_key}"
    )
    print_failures(failures, "failed photos (skipped):")
    return 0


def run_backbones(args) -> int:
    from polyvse.features.backbones import available_backbones

    notes = {
        "efficientnet-lite0": "1280-d, ImageNet weights included, works offline (default)",
        "resnet152": "2048-d, torchvision ImageNet weights, downloaded once into the torch hub cache",
    }
    for name in available_backbones():
        print(f"{name:20s} {notes.get(name, '')}")
    return 0


def run_embed_text(args) -> int:
    from polyvse.data.registry import load_dataset
    from polyvse.languages import check_language
    from polyvse.modules.pretrained import get_pretrained_encoder, tower_names
    from polyvse.modules.pretrained.cache import sentence_cache_dir
    from polyvse.modules.pretrained.precompute import precompute_embeddings
    from polyvse.util.paths import data_root

    root = data_root(args.data_root)
    langs = [check_language(x.strip()) for x in args.langs.split(",") if x.strip()]
    corpus = load_dataset(args.dataset, root).filter(langs=langs)
    if args.source:
        corpus.captions = [c for c in corpus.captions if c.source == args.source]
        if not corpus.captions:
            raise SystemExit(f"polyvse: error: {args.dataset} has no caption of source {args.source!r}")
    encoders = [get_pretrained_encoder(name) for name in tower_names(args.encoder)]  # unknown names fail first
    if args.text_tail_layers and "e5-small" not in [e.name for e in encoders]:
        raise SystemExit(
            f"polyvse: error: --text-tail-layers is e5-small's trainable tail; --encoder {args.encoder} has no e5-small"
        )
    for encoder in encoders:
        tail = args.text_tail_layers if encoder.name == "e5-small" else 0
        done = precompute_embeddings(
            encoder,
            corpus.captions,
            sentence_cache_dir(root),
            languages=langs,
            report=lambda line: print(line, flush=True),
            tail_layers=tail,
        )
        what = f"{encoder.name} front (cut {tail}) state" if tail else encoder.name
        print(f"{args.dataset}: {done['texts']} captions in the {what} cache ({done['computed']} computed now)")
    return 0
