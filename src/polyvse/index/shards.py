"""Index shards: each rank of a sharded build embeds one slice of the photos into its own file; a merge
then writes the index.

A sharded build cuts the photo list (deduplicated, in the order given: the command line sorts it) into
contiguous slices (:func:`polyvse.sharding.shard_bounds`). Shard k of n embeds its slice through the
content-addressed feature cache and writes, atomically,

    <index>/.shards/shard-<k>-of-<n>.npz        k and n zero-padded to 5 digits

The merge reads all n files, checks that they belong to one build (same photo list, same model, same build
settings, slices that tile the list) and writes the index a single-process build of the same photos writes:
same photo order and ids, same vectors, same manifest apart from its timestamps (and, for a CSLS checkpoint, the
same photo penalties, from the banks of the checkpoint the shards recorded: polyvse.csls.penalties). It then deletes
``.shards``. A rerun reuses every shard file that matches it, so after a killed rank only the missing
shards are computed.

A shard file is a numpy ``.npz`` (no pickles):
    vectors   float32 (m, dim): the stored vectors of the slice's readable photos
    rows      int64 (m,): their positions in the whole photo list
    meta      uint8, UTF-8 JSON: format, shard, num_shards, start, stop, total, photo_list (sha256 of the whole
              list), entries ([path, name] for each photo of the slice), stamps ([size, mtime_ns] of each of
              those files, so that a rerun notices a changed photo), model (the manifest's model section), build
              (kind, exact_threshold, recall_target, max_memory when given, csls_penalties when false,
              csls_penalty_langs when given), failures ([path, reason]), extracted, cached, seconds
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import DataError
from ..features.limits import DEFAULT_MAX_PIXELS
from ..sharding import shard_bounds
from ..util.atomic import atomic_open
from .build import IndexReport, _no_photo_read, check_new_index, checked_entries, embed_photo_files, write_new_index
from .fingerprint import short
from .store import DEFAULT_EXACT_THRESHOLD, DEFAULT_RECALL_TARGET, PhotoEntry, PhotoIndex, index_lock, model_section

__all__ = [
    "SHARDS_DIR",
    "IndexShard",
    "IndexShardError",
    "ShardReport",
    "build_index_shard",
    "merge_index_shards",
    "read_all_shards",
    "read_shard",
    "shard_path",
]

log = logging.getLogger(__name__)

SHARD_FORMAT = "polyvse-index-shard"
SHARD_FORMAT_VERSION = 1
SHARDS_DIR = ".shards"
_SHARD_FILE = re.compile(r"^shard-(\d{5})-of-(\d{5})\.npz$")


class IndexShardError(DataError):
    """A shard file that is missing, unreadable or does not belong with the others."""


def recorded_penalty_writer(model_info: dict, budget: int | None = None, store: bool = True, langs=None):
    """The r_C writer of the CSLS checkpoint a manifest's model section records (its banks read from the weights
    file, without torch), None when it records none, the folder is gone or unreadable, or it does not score with
    CSLS; ``SKIPPED`` for such a checkpoint when not ``store``; ``langs`` as for
    ``polyvse.csls.penalties.penalty_writer``."""
    from ..csls.penalties import SKIPPED, writer_of
    from ..csls.search import SearchHubness
    from ..errors import CheckpointError
    from ..model.checkpoint import HubnessBankFile, read_checkpoint_config

    path = model_info.get("checkpoint")
    try:
        cfg = read_checkpoint_config(path) if path else None
        if cfg is None or not cfg.retrieval or model_info.get("similarity") != "cosine":
            return None
        if not store:
            return SKIPPED
        return writer_of(
            SearchHubness.from_bank_file(cfg.retrieval["k"], HubnessBankFile(cfg.weights)), budget, None, True, langs
        )
    except (CheckpointError, DataError, OSError):
        return None


def shard_path(index_dir: str | os.PathLike, shard: int, num_shards: int) -> Path:
    return Path(index_dir) / SHARDS_DIR / f"shard-{shard:05d}-of-{num_shards:05d}.npz"


def photo_list_digest(entries: Sequence[tuple[str, str]]) -> str:
    """sha256 of the whole (path, shown name) list: shards of one build agree on it."""
    h = hashlib.sha256()
    for path, name in entries:
        h.update(json.dumps([path, name], ensure_ascii=False).encode("utf-8") + b"\n")
    return "sha256:" + h.hexdigest()


@dataclass
class IndexShard:
    """One shard file, read and checked on its own (:func:`merge_index_shards` checks shards against each other)."""

    path: Path
    meta: dict
    vectors: np.ndarray  # float32 (m, dim)
    rows: np.ndarray  # int64 (m,)

    @property
    def shard(self) -> int:
        return int(self.meta["shard"])

    @property
    def num_shards(self) -> int:
        return int(self.meta["num_shards"])

    @property
    def fingerprint(self) -> str:
        return self.meta["model"]["fingerprint"]

    @property
    def failures(self) -> list[tuple[str, str]]:
        return [(str(p), str(r)) for p, r in self.meta["failures"]]


@dataclass
class ShardReport:
    path: Path
    shard: int
    num_shards: int
    photos: int  # photos in this shard's slice
    embedded: int  # readable photos of the slice, now in the shard file
    reused: bool = False  # a matching shard file from an earlier run was kept
    failures: list[tuple[str, str]] = field(default_factory=list)
    extracted: int = 0
    cached: int = 0
    seconds: float = 0.0


def _bad(path: Path, what: str) -> IndexShardError:
    return IndexShardError(f"{what}; delete this shard file and build the shard again", path)


def read_shard(path: str | os.PathLike) -> IndexShard:
    """Read one shard file; IndexShardError naming it if it is damaged or not a shard."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            vectors, rows = z["vectors"], z["rows"]
            meta = json.loads(bytes(z["meta"]).decode("utf-8"))
    except FileNotFoundError:
        raise
    except Exception as exc:  # noqa: BLE001 - numpy / zipfile / json raise many types for damaged files
        raise _bad(path, f"unreadable shard file ({type(exc).__name__}: {exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != SHARD_FORMAT:
        raise _bad(path, "not a polyvse index shard")
    if meta.get("format_version") != SHARD_FORMAT_VERSION:
        raise _bad(
            path, f"shard format version {meta.get('format_version')!r}, this polyvse reads {SHARD_FORMAT_VERSION}"
        )
    missing = [
        k
        for k in (
            "shard",
            "num_shards",
            "start",
            "stop",
            "total",
            "photo_list",
            "entries",
            "model",
            "build",
            "failures",
        )
        if k not in meta
    ]
    if missing:
        raise _bad(path, f"the shard's metadata lacks {', '.join(missing)}")
    if vectors.dtype != np.float32 or vectors.ndim != 2 or rows.dtype != np.int64 or rows.shape != (len(vectors),):
        raise _bad(
            path, f"vectors {vectors.shape} {vectors.dtype} and rows {rows.shape} {rows.dtype} do not fit together"
        )
    start, stop = int(meta["start"]), int(meta["stop"])
    if len(meta["entries"]) != stop - start or (
        len(rows) and (rows.min() < start or rows.max() >= stop or (np.diff(rows) <= 0).any())
    ):
        raise _bad(path, f"its rows do not lie in its slice {start}..{stop - 1} in order")
    return IndexShard(path, meta, vectors, rows)


def _write_shard(path: Path, meta: dict, vectors: np.ndarray, rows: np.ndarray) -> None:
    data = np.frombuffer(json.dumps(meta, ensure_ascii=False).encode("utf-8"), dtype=np.uint8)
    with atomic_open(path, "wb", suffix=".tmp") as fh:
        np.savez(
            fh,
            vectors=np.ascontiguousarray(vectors, dtype=np.float32),
            rows=np.asarray(rows, dtype=np.int64),
            meta=data,
        )


def _file_stamps(paths: Sequence[str]) -> list:
    """[size, mtime_ns] per photo file (None if it cannot be read): tells a rerun whether its slice changed."""
    stamps = []
    for p in paths:
        try:
            st = os.stat(p)
            stamps.append([st.st_size, st.st_mtime_ns])
        except OSError:
            stamps.append(None)
    return stamps


def _reusable(path: Path, identity: dict, fingerprint: str) -> IndexShard | None:
    """The shard file at ``path`` if an earlier run wrote it for this very slice of this photo list and model."""
    if not path.is_file():
        return None
    try:
        shard = read_shard(path)
    except (IndexShardError, FileNotFoundError) as exc:
        log.warning("recomputing shard %s: %s", path, exc)
        return None
    same = all(shard.meta[k] == v for k, v in identity.items()) and shard.fingerprint == fingerprint
    return shard if same else None


def build_index_shard(
    model,
    photos: Sequence[str | os.PathLike],
    out: str | os.PathLike,
    *,
    shard: int,
    num_shards: int,
    cache_dir,
    names: Sequence[str] | None = None,
    checkpoint_path: str | os.PathLike | None = None,
    kind: str = "auto",
    exact_threshold: int = DEFAULT_EXACT_THRESHOLD,
    recall_target: float = DEFAULT_RECALL_TARGET,
    batch_size: int = 32,
    num_workers: int = 0,
    progress: bool = True,
    strict: bool = False,
    overwrite: bool = False,
    max_pixels: int | None = DEFAULT_MAX_PIXELS,
    max_memory: int | None = None,
    csls_penalties: bool = True,
    csls_penalty_langs: Sequence[str] | None = None,
) -> ShardReport:
    """Embed shard ``shard`` of ``num_shards`` of ``photos`` into ``<out>/.shards/`` (see the module doc).

    Every shard of a build must get the same ``photos`` (and names) in the same order. A shard file an earlier
    run wrote for the same slice of the same photo list with the same model is kept, not recomputed.
    """
    t0 = time.time()
    root = Path(out)
    entries = checked_entries(root, model, photos, names, kind, exact_threshold, overwrite)
    start, stop = shard_bounds(len(entries), shard, num_shards)
    model_info = model_section(model, checkpoint_path)
    build = _build_settings(kind, exact_threshold, recall_target, max_memory, csls_penalties, csls_penalty_langs)
    identity = {
        "shard": shard,
        "num_shards": num_shards,
        "start": start,
        "stop": stop,
        "total": len(entries),
        "photo_list": photo_list_digest(entries),
    }
    path = shard_path(root, shard, num_shards)
    stamps = _file_stamps([p for p, _ in entries[start:stop]])
    previous = _reusable(path, identity, model_info["fingerprint"])
    # a photo of the slice that changed (or appeared, or went) since the shard was written: embedded again
    if previous is not None and previous.meta.get("stamps") == stamps and not (strict and previous.failures):
        return _kept_shard(previous, build, model_info, t0)
    embed = dict(
        batch_size=batch_size, num_workers=num_workers, progress=progress, strict=strict, max_pixels=max_pixels
    )
    meta = {
        **identity,
        "entries": [list(e) for e in entries[start:stop]],
        "stamps": stamps,
        "model": model_info,
        "build": build,
    }
    return _embed_shard(model, path, meta, cache_dir, embed, t0)


def _embed_shard(model, path: Path, meta: dict, cache_dir, embed: dict, t0: float) -> ShardReport:
    """Embed the slice ``meta`` names (identity, entries, stamps, model, build) into a new shard file."""
    entries = meta["entries"]
    vectors, ok, result = embed_photo_files(model, [p for p, _ in entries], cache_dir, **embed)
    meta = {
        "format": SHARD_FORMAT,
        "format_version": SHARD_FORMAT_VERSION,
        **meta,
        "failures": [list(f) for f in result.failures],
        "extracted": result.extracted,
        "cached": result.cached,
        "seconds": round(time.time() - t0, 3),
    }
    _write_shard(path, meta, vectors, meta["start"] + np.asarray(ok, dtype=np.int64))
    return ShardReport(
        path,
        meta["shard"],
        meta["num_shards"],
        photos=len(entries),
        embedded=len(ok),
        failures=result.failures,
        extracted=result.extracted,
        cached=result.cached,
        seconds=time.time() - t0,
    )


def _kept_shard(previous: IndexShard, build: dict, model_info: dict, t0: float) -> ShardReport:
    """The report of a shard file kept from an earlier run; its settings and model section rewritten where they
    changed (same vectors)."""
    if previous.meta["build"] != build or previous.meta["model"] != model_info:
        _write_shard(
            previous.path, {**previous.meta, "build": build, "model": model_info}, previous.vectors, previous.rows
        )
    return ShardReport(
        previous.path,
        previous.shard,
        previous.num_shards,
        photos=int(previous.meta["stop"]) - int(previous.meta["start"]),
        embedded=len(previous.rows),
        reused=True,
        failures=previous.failures,
        seconds=time.time() - t0,
    )


def _build_settings(
    kind: str,
    exact_threshold: int,
    recall_target: float,
    max_memory: int | None,
    csls_penalties: bool,
    csls_penalty_langs: Sequence[str] | None,
) -> dict:
    """The settings a shard records for the merge (every shard of a build must have the same)."""
    return {
        "kind": kind,
        "exact_threshold": int(exact_threshold),
        "recall_target": float(recall_target),
        **({"max_memory": int(max_memory)} if max_memory is not None else {}),
        **({} if csls_penalties else {"csls_penalties": False}),
        **(
            {"csls_penalty_langs": list(csls_penalty_langs)}
            if csls_penalties and csls_penalty_langs is not None
            else {}
        ),
    }


def _shard_files(root: Path) -> dict[tuple[int, int], Path]:
    folder = root / SHARDS_DIR
    if not folder.is_dir():
        return {}
    found = {}
    for f in folder.iterdir():
        m = _SHARD_FILE.match(f.name)
        if m:
            found[(int(m.group(1)), int(m.group(2)))] = f
    return found


def _check_against(shard: IndexShard, first: IndexShard, expected_bounds: tuple[int, int]) -> None:
    """Refuse a shard that does not belong to the same build as shard 0, naming the file and the difference."""
    m, f = shard.meta, first.meta
    name0 = first.path.name
    if m["photo_list"] != f["photo_list"] or m["total"] != f["total"]:
        raise IndexShardError(
            f"written for another photo list than {name0} ({m['total']} vs {f['total']} photos, or the same number "
            "in another order); every shard of a build needs the same --images / --list. Rebuild this shard with "
            "the same photos, or delete the stale shard files",
            shard.path,
        )
    if shard.fingerprint != first.fingerprint:
        raise IndexShardError(
            f"embedded by another model ({short(shard.fingerprint)}, checkpoint {m['model'].get('checkpoint')}) "
            f"than {name0} ({short(first.fingerprint)}, checkpoint {f['model'].get('checkpoint')}); rebuild this "
            "shard with the same --checkpoint",
            shard.path,
        )
    if m["build"] != f["build"]:
        raise IndexShardError(
            f"written with other build settings ({m['build']}) than {name0} ({f['build']}); "
            "build every shard with the same --kind / --exact-threshold / --recall-target / "
            "--csls-penalties / --csls-penalty-langs",
            shard.path,
        )
    if (int(m["start"]), int(m["stop"])) != expected_bounds:
        raise IndexShardError(
            f"holds photos {m['start']}..{int(m['stop']) - 1}, shard {shard.shard} of "
            f"{shard.num_shards} should hold {expected_bounds[0]}..{expected_bounds[1] - 1}",
            shard.path,
        )
    if first.vectors.shape[1] != shard.vectors.shape[1]:
        raise IndexShardError(
            f"holds {shard.vectors.shape[1]}-d vectors, {name0} {first.vectors.shape[1]}-d", shard.path
        )


def read_all_shards(index_dir: str | os.PathLike, num_shards: int | None = None) -> list[IndexShard]:
    """All shards of one build in shard order, checked against each other; IndexShardError naming the first
    missing, damaged or mismatched shard file otherwise."""
    root = Path(index_dir)
    found = _shard_files(root)
    folder = root / SHARDS_DIR
    if num_shards is None:
        counts = sorted({n for _, n in found})
        if not counts:
            raise IndexShardError(
                "no shard files (shard-K-of-N.npz) to merge; write them with `polyvse index build "
                "... --shard K/N` or by running `polyvse index build` under torchrun",
                folder,
            )
        if len(counts) > 1:
            raise IndexShardError(
                f"shard files of builds with different shard counts ({', '.join(map(str, counts))})"
                "; delete the stale ones",
                folder,
            )
        num_shards = counts[0]
    missing = [k for k in range(num_shards) if (k, num_shards) not in found]
    if missing:
        listed = ", ".join(shard_path(root, k, num_shards).name for k in missing[:5])
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise IndexShardError(
            f"missing ({len(missing)} of {num_shards} shards missing: {listed}{more}). Build shard {missing[0]} "
            f"(`polyvse index build ... --shard {missing[0]}/{num_shards}`, or rerun the torchrun command: finished "
            "shards are kept), or copy the file here from the machine that wrote it; then merge again",
            shard_path(root, missing[0], num_shards),
        )
    shards = [read_shard(found[(k, num_shards)]) for k in range(num_shards)]
    for k, shard in enumerate(shards):
        if (shard.shard, shard.num_shards) != (k, num_shards):
            raise IndexShardError(
                f"its contents are shard {shard.shard} of {shard.num_shards}, its name says "
                f"{k} of {num_shards} (renamed?)",
                shard.path,
            )
        _check_against(shard, shards[0], shard_bounds(int(shards[0].meta["total"]), k, num_shards))
    return shards


def merge_index_shards(
    out: str | os.PathLike, *, num_shards: int | None = None, overwrite: bool = False, keep_shards: bool = False
) -> IndexReport:
    """Write the index at ``out`` from the shard files in ``<out>/.shards`` (all ``num_shards`` of them; by
    default as many as the files there say), then delete those files (unless ``keep_shards``)."""
    t0 = time.time()
    root = Path(out)
    shards = read_all_shards(root, num_shards)
    first = shards[0].meta
    build, model_info = first["build"], first["model"]
    check_new_index(root, model_info["similarity"], build["kind"], int(build["exact_threshold"]), overwrite)
    kept: list[tuple[str, str]] = []
    for shard in shards:
        start = int(shard.meta["start"])
        kept += [tuple(shard.meta["entries"][int(r) - start]) for r in shard.rows]
    failures = [f for shard in shards for f in shard.failures]
    if not kept:
        raise _no_photo_read(int(first["total"]), failures)
    photo_list = [PhotoEntry(i, name, path) for i, (path, name) in enumerate(kept)]
    vectors = np.concatenate([shard.vectors for shard in shards])
    with index_lock(root):
        write_new_index(
            root,
            model_info,
            model_info["similarity"],
            photo_list,
            vectors,
            build["kind"],
            int(build["exact_threshold"]),
            float(build["recall_target"]),
            build.get("max_memory"),
            csls=recorded_penalty_writer(
                model_info,
                build.get("max_memory"),
                store=build.get("csls_penalties", True),
                langs=build.get("csls_penalty_langs"),
            ),
        )
    if not keep_shards:
        shutil.rmtree(root / SHARDS_DIR, ignore_errors=True)
    return IndexReport(
        PhotoIndex.open(root),
        added=len(photo_list),
        failures=failures,
        extracted=sum(int(s.meta.get("extracted", 0)) for s in shards),
        cached=sum(int(s.meta.get("cached", 0)) for s in shards),
        seconds=time.time() - t0,
    )
