"""`polyvse index build|add|merge|info`: embed a photo collection into a searchable FAISS index.

    polyvse index build --checkpoint C --images DIR --out INDEX
    polyvse index add   --index INDEX --images DIR2            (only new photos are embedded)
    polyvse index info  --index INDEX

Sharded builds: under ``torchrun`` every rank embeds its slice of the sorted photos into a shard file and
rank 0 merges them; ``--shard K/N`` writes one shard as an independent job and ``polyvse index merge --out
INDEX`` merges once all N are written (see polyvse.index.shards).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from polyvse.util.paths import cache_root

from .shared import add_device_args, add_photo_fit_arg, device_of, print_failures, squash_of, workers_of


def _lang_list(text: str) -> list[str]:
    """--csls-penalty-langs: comma-separated language codes, canonical (ISO 639-1 where there is one)."""
    from polyvse.languages import UnknownLanguageError, check_language

    codes = [c.strip() for c in text.split(",") if c.strip()]
    if not codes:
        raise argparse.ArgumentTypeError("give at least one language code, e.g. en,de")
    try:
        return list(dict.fromkeys(check_language(c) for c in codes))
    except UnknownLanguageError as exc:  # it names the code and what to give instead
        raise argparse.ArgumentTypeError(str(exc)) from None


def _add_photo_source(p) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--images", metavar="DIR", help="folder of photos (searched recursively)")
    src.add_argument(
        "--list",
        metavar="FILE",
        help="text file with one photo path per line (relative paths are "
        "relative to the list file's folder; blank lines and # comments ignored)",
    )
    p.add_argument(
        "--cache-dir",
        metavar="DIR",
        help="feature cache folder (default: $POLYVSE_CACHE/features, else <data root>/cache/features)",
    )
    p.add_argument("--data-root", metavar="DIR", help="data root (default: $POLYVSE_DATA, else ~/.cache/polyvse)")
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="photo decoding processes (0 = in the main process; default: on CPU up to 2, on a GPU every "
        "core but one, at most 16)",
    )
    p.add_argument("--batch-size", type=int, default=32, metavar="N", help="photos per batch (default: %(default)s)")
    p.add_argument("--strict", action="store_true", help="stop at the first unreadable photo instead of skipping it")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    add_device_args(p)


def register(sub) -> None:
    p = sub.add_parser("index", help="build a searchable photo index with a trained model")
    actions = p.add_subparsers(dest="index_command", required=True)
    _register_build(actions)
    _register_merge(actions)
    _register_add(actions)
    _register_info_verify(actions)


def _register_build(actions) -> None:
    b = actions.add_parser(
        "build",
        help="embed a photo collection into a new index",
        description="Embed photos with a trained model into a FAISS index: exact search below "
        "--exact-threshold photos, IVF tuned to --recall-target above it; photo ids and paths are stored "
        "beside it. Image features go through the feature cache, so an interrupted build resumes.",
    )
    b.add_argument("--checkpoint", required=True, metavar="DIR", help="checkpoint folder of the model")
    b.add_argument("--out", required=True, metavar="INDEX", help="index folder to create")
    _add_photo_source(b)
    _add_structure_args(b)
    b.add_argument("--force", action="store_true", help="replace an existing index at --out")
    _add_csls_build_args(b)
    _add_milvus_args(b)
    add_photo_fit_arg(b)
    b.add_argument(
        "--shard",
        metavar="K/N",
        help="embed only shard K of N of the sorted photos into "
        "INDEX/.shards, as an independent job; merge with `polyvse index merge` once all N are written "
        "(under torchrun every rank takes its own shard and rank 0 merges, without this)",
    )
    b.set_defaults(func=run_build)


def _add_structure_args(b) -> None:
    """index build: the search structure, its memory budget and its tuning."""
    from polyvse.index.defaults import DEFAULT_EXACT_THRESHOLD, DEFAULT_RECALL_TARGET

    b.add_argument(
        "--kind",
        choices=["auto", "exact", "ivf", "hnsw", "ivfpq"],
        default="auto",
        help="search structure (default auto: exact below the threshold, IVF above; ivfpq: compressed "
        "codes in memory, re-ranked from the vectors on disk)",
    )
    b.add_argument(
        "--max-memory",
        metavar="SIZE",
        help="memory budget of the search structure and photo list, e.g. "
        "8GB: a collection whose exact or IVF structure would not fit gets the compressed one (ivfpq) with "
        "the finest codes that fit; kept for later `index add` (default: no budget)",
    )
    b.add_argument(
        "--exact-threshold",
        type=int,
        default=DEFAULT_EXACT_THRESHOLD,
        metavar="N",
        help="photos below which search is exact (default: %(default)s)",
    )
    b.add_argument(
        "--recall-target",
        type=float,
        default=DEFAULT_RECALL_TARGET,
        metavar="R",
        help="recall@10 against exact search that IVF/HNSW is tuned to (default: %(default)s)",
    )


def _add_csls_build_args(b) -> None:
    """index build: a CSLS checkpoint's photo penalties, stored with the index or not."""
    b.add_argument(
        "--csls-penalties",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="for a checkpoint that ranks by CSLS, store each photo's CSLS penalty with the index, so that "
        "a text search reads them instead of scanning the caption bank (default: stored); "
        "--no-csls-penalties skips them for a very large build (at 10M photos they add over an hour on two "
        "cores), and each search then computes its candidates' penalties",
    )
    b.add_argument(
        "--csls-penalty-langs",
        metavar="LANGS",
        type=_lang_list,
        help="store the CSLS penalties for queries in these languages only, e.g. en,de (each costs a scan "
        "of its caption bank per photo; a language without a bank of its own takes the pooled one, which "
        "scans every bank); queries in other languages compute their candidates' (default: every bank)",
    )


def _add_milvus_args(b) -> None:
    """index build: the vectors in files beside the manifest, or in a Milvus collection."""
    b.add_argument(
        "--backend",
        choices=["faiss", "milvus"],
        default="faiss",
        help="where the vectors live: faiss (files in --out, the default) or milvus (a collection in a "
        "Milvus server or cluster, or an embedded milvus-lite file: --uri; --out keeps the manifest, and "
        "`index add`, `search` and `serve` find the collection from it)",
    )
    b.add_argument(
        "--uri",
        metavar="URI",
        help="with --backend milvus: http://host:19530 for a server or cluster "
        "(token, if it needs one, in $POLYVSE_MILVUS_TOKEN), or a FILE.db for embedded milvus-lite",
    )
    b.add_argument(
        "--collection",
        metavar="NAME",
        help="with --backend milvus: the collection (default: polyvse_ and the --out folder's name)",
    )
    b.add_argument(
        "--milvus-db",
        metavar="NAME",
        help="with --backend milvus: the Milvus database (default: the server's default one)",
    )


def _register_merge(actions) -> None:
    m = actions.add_parser(
        "merge",
        help="write an index from the shard files of a sharded build",
        description="Write the index at --out from INDEX/.shards/shard-K-of-N.npz, written by `polyvse index "
        "build --shard K/N` (or by ranks that could not meet, e.g. on machines without a shared folder: copy their "
        "shard files there first). The result equals a single-process build of the same photos. Shards that are "
        "missing or belong to another build are refused, naming the file.",
    )
    m.add_argument("--out", required=True, metavar="INDEX", help="index folder holding the .shards folder")
    m.add_argument("--force", action="store_true", help="replace an existing index at --out")
    m.add_argument("--keep-shards", action="store_true", help="keep the shard files after merging")
    m.set_defaults(func=run_merge)


def _register_add(actions) -> None:
    a = actions.add_parser(
        "add",
        help="append photos to an index (only new photos are embedded)",
        description="Append photos to an index. Photos already in it (same file) are skipped and the indexed "
        "ones are not recomputed. The checkpoint must be the one that built the index.",
    )
    a.add_argument("--index", required=True, metavar="INDEX", help="index folder")
    a.add_argument("--checkpoint", metavar="DIR", help="checkpoint folder (default: the one recorded in the index)")
    a.add_argument(
        "--csls-penalties",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="store each photo's CSLS penalty (--csls-penalties: the indexed photos' too, where the index "
        "has none) or not (--no-csls-penalties); default: as the index was built",
    )
    a.add_argument(
        "--csls-penalty-langs",
        metavar="LANGS",
        type=_lang_list,
        help="store the CSLS penalties for queries in these languages only (the indexed photos' too, where "
        "the index stores other languages'); default: the languages the index stores them for",
    )
    _add_photo_source(a)
    a.set_defaults(func=run_add)


def _register_info_verify(actions) -> None:
    i = actions.add_parser("info", help="describe an index")
    i.add_argument("--index", required=True, metavar="INDEX", help="index folder")
    i.add_argument("--json", action="store_true", help="print the manifest as JSON")
    i.set_defaults(func=run_info)
    v = actions.add_parser(
        "verify",
        help="check every file of an index against the checksums its manifest recorded",
        description="Read every file of an index whole and compare it with the size and SHA-256 its manifest "
        "recorded when it was written (opening an index checks sizes, and the contents only of small files written "
        "since). A damaged file is named, exit status 2. An index written before checksums were recorded gets its "
        "sizes and structure checked.",
    )
    v.add_argument("--index", required=True, metavar="INDEX", help="index folder")
    v.set_defaults(func=run_verify)


def _photos(args) -> tuple[list[Path], list[str]]:
    """(photo paths, shown names) from --images or --list."""
    from polyvse.data.user_files import photo_source
    from polyvse.errors import DataError

    if args.batch_size < 1:
        raise DataError(f"--batch-size must be at least 1, not {args.batch_size}")
    photos, base = photo_source(args.images, args.list)
    names = []
    for p in photos:
        try:
            names.append(p.relative_to(base).as_posix())
        except ValueError:
            names.append(p.name)
    return photos, names


def _cache_dir(args) -> Path:
    return Path(args.cache_dir).expanduser() if args.cache_dir else cache_root(args.data_root) / "features"


def _report(report, verb: str) -> None:
    index = report.index
    parts = [f"{report.added} photos {verb}"]
    if report.already_indexed:
        parts.append(f"{report.already_indexed} already in the index")
    parts.append(f"{len(report.failures)} unreadable")
    csls = index.manifest.get("csls") or {}  # a CSLS checkpoint's photo penalties, computed with this generation
    penalties = (
        f", of which {csls['seconds']:.1f} s CSLS penalties"
        if "seconds" in csls
        else ", CSLS penalties skipped"
        if csls.get("skipped")
        else ""
    )
    print(
        ", ".join(parts) + f" ({report.extracted} features computed, {report.cached} from the cache, "
        f"{report.seconds:.1f} s{penalties})"
    )
    print(f"index: {index.root}  ({index.describe()})")
    print_failures(report.failures, "unreadable photos (skipped):")


def _without_torch(args) -> tuple[str, int] | None:
    """(device, decoding threads) in an install without torch, where photos go through the checkpoint's ONNX image
    encoder on the CPU in this one process; None where torch is installed."""
    import os

    from polyvse.errors import DataError
    from polyvse.features.onnx_encoder import torch_installed

    if torch_installed():
        return None
    if getattr(args, "shard", None):
        raise DataError("sharded builds need torch: pip install 'polyvse[train]'")
    if args.workers is not None and args.workers < 0:
        raise DataError(f"--workers must be 0 or more, not {args.workers}")
    return args.device, min(2, os.cpu_count() or 1) if args.workers is None else args.workers


class _OneProcess:
    sharded = False


def run_build(args) -> int:
    light = _without_torch(args)
    if light is not None:
        return _build(args, _OneProcess(), *light)
    from ..shard_role import run_with_shard_role

    device = device_of(args)  # before the process group: a GPU rank's group is NCCL on its own GPU
    return run_with_shard_role(getattr(args, "shard", None), lambda role: _build(args, role, device), device)


def _build(args, role, device, workers: int | None = None) -> int:
    import time

    from polyvse.index import build_index
    from polyvse.model.loading import photo_model

    t0 = time.time()
    # torch where installed, else the checkpoint's ONNX image encoder (polyvse.model.loading.photo_model)
    model = photo_model(args.checkpoint, device=device, squash_photos=squash_of(args))
    photos, names = _photos(args)
    options = _build_options(args, names, device, workers)
    if not role.sharded:
        report = build_index(
            model,
            photos,
            args.out,
            progress=not args.quiet,
            backend=args.backend,
            uri=args.uri,
            collection=args.collection,
            db_name=args.milvus_db,
            **options,
        )
        _report(report, "indexed")
        return 0
    return _build_sharded(args, role, model, photos, options, t0)


def _build_options(args, names: list[str], device, workers: int | None) -> dict:
    """The keyword arguments a whole build and a shard's build share (``workers``: None for --workers)."""
    from polyvse.index.compressed import parse_memory

    return dict(
        cache_dir=_cache_dir(args),
        names=names,
        checkpoint_path=args.checkpoint,
        kind=args.kind,
        exact_threshold=args.exact_threshold,
        recall_target=args.recall_target,
        max_memory=parse_memory(args.max_memory),
        batch_size=args.batch_size,
        num_workers=workers_of(args, device) if workers is None else workers,
        strict=args.strict,
        overwrite=args.force,
        csls_penalties=args.csls_penalties,
        csls_penalty_langs=args.csls_penalty_langs,
    )


def _build_sharded(args, role, model, photos: list[Path], options: dict, t0: float) -> int:
    """This process's shard of a sharded build; rank 0 of a torchrun job then merges the shards and reports."""
    import dataclasses
    import time

    from polyvse.index import build_index_shard, merge_index_shards

    if args.backend != "faiss":
        from polyvse.errors import DataError

        raise DataError(
            "sharded builds write FAISS indexes; build a Milvus one in one process (Milvus itself "
            "spreads the collection over its nodes)"
        )
    from ..shard_role import run_shard  # torch's process groups: only a sharded build needs them

    shards = run_shard(
        role,
        lambda: build_index_shard(
            model,
            photos,
            args.out,
            shard=role.shard,
            num_shards=role.num_shards,
            progress=not args.quiet and (role.is_main or role.independent),
            **options,
        ),
    )
    if role.independent:
        s = shards[0]
        state = (
            "kept from an earlier run"
            if s.reused
            else (f"{s.extracted} features computed, {s.cached} from the cache, {s.seconds:.1f} s")
        )
        print(f"{role.label}: {s.embedded} of {s.photos} photos embedded ({len(s.failures)} unreadable; {state})")
        print(f"shard file: {s.path}")
        print(f"once all {role.num_shards} shards are written: polyvse index merge --out {args.out}")
        return 0
    if not role.is_main:
        return 0  # rank 0 merges and reports
    report = merge_index_shards(args.out, num_shards=role.num_shards, overwrite=args.force)
    report = dataclasses.replace(
        report,
        extracted=sum(s.extracted for s in shards),
        cached=sum(s.cached for s in shards),
        seconds=time.time() - t0,
    )
    reused = sum(s.reused for s in shards)
    print(f"{role.num_shards} shards merged" + (f" ({reused} kept from an earlier run)" if reused else ""))
    _report(report, "indexed")
    return 0


def run_merge(args) -> int:
    from polyvse.index import merge_index_shards

    report = merge_index_shards(args.out, overwrite=args.force, keep_shards=args.keep_shards)
    _report(report, "merged into the index")
    return 0


def run_add(args) -> int:
    from polyvse.index import PhotoIndex, add_to_index, model_for_index

    index = PhotoIndex.open(args.index)
    light = _without_torch(args)
    device, workers = light if light is not None else (device_of(args), None)
    model, ckpt = model_for_index(index, args.checkpoint, device=device)
    photos, names = _photos(args)
    report = add_to_index(
        model,
        args.index,
        photos,
        cache_dir=_cache_dir(args),
        names=names,
        checkpoint_path=ckpt if args.checkpoint else None,
        batch_size=args.batch_size,
        num_workers=workers_of(args, device) if workers is None else workers,
        progress=not args.quiet,
        strict=args.strict,
        csls_penalties=args.csls_penalties,
        csls_penalty_langs=args.csls_penalty_langs,
    )
    _report(report, "added")
    return 0


def run_info(args) -> int:
    import json

    from polyvse.index import PhotoIndex

    index = PhotoIndex.open(args.index)
    if args.json:
        print(json.dumps(index.manifest, indent=2, ensure_ascii=False))
        return 0
    m = index.manifest
    print(f"index:      {index.root}")
    print(f"photos:     {index.count}")
    print(f"search:     {index.describe()}")
    print(
        f"model:      {m['model']['fingerprint'][:19]}…  ({m['model']['similarity']} similarity, "
        f"languages {', '.join(m['model']['languages'])}, {m['model']['backbone']})"
    )
    print(f"checkpoint: {m['model'].get('checkpoint') or '(not recorded)'}")
    print(f"updated:    {m.get('updated')}  (generation {m.get('generation')})")
    if (m.get("csls") or {}).get("skipped"):
        print(
            "csls:       photo penalties skipped (--no-csls-penalties): each text search computes its candidates' "
            "against the caption bank (a rebuild, or the next `polyvse index add --csls-penalties`, stores them)"
        )
    elif m.get("csls"):
        keys = [key for key in m["csls"]["keys"] if key != "*"]
        banks = [f"the banks of {', '.join(keys)}"] if keys else []
        banks += ["the pooled bank"] if "*" in m["csls"]["keys"] else []
        print(
            f"csls:       each photo's penalty stored for {' and '.join(banks)} (k {m['csls']['k']}): text "
            "searches in those languages read no caption bank"
        )
    elif m.get("backend", {}).get("name", "faiss") == "faiss" and _scores_with_csls(m["model"].get("checkpoint")):
        print(
            "csls:       no photo penalties stored: each text search computes its candidates' against the caption "
            "bank (rebuild with `polyvse index build --force` to store them)"
        )
    return 0


def run_verify(args) -> int:
    from polyvse.index.store import verify_index

    report = verify_index(args.index)
    size = sum(report["files"].values())
    if report["digests"]:
        print(
            f"ok: {report['index'].root}: {len(report['files'])} files ({size} bytes) match their recorded sizes and "
            "SHA-256"
        )
    else:
        print(
            f"ok: {report['index'].root}: {len(report['files'])} files ({size} bytes) match their recorded sizes; "
            "the manifest predates recorded checksums (the next `polyvse index add` or a rebuild records them)"
        )
    return 0


def _scores_with_csls(checkpoint: str | None) -> bool:
    """Whether the recorded checkpoint's config.json scores retrieval with CSLS (False when it cannot be read)."""
    import json

    try:
        config = json.loads((Path(checkpoint) / "config.json").read_text(encoding="utf-8"))
        return (config.get("retrieval") or {}).get("scoring") == "csls"
    except (TypeError, OSError, ValueError, AttributeError):
        return False
