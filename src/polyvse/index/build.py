"""Building an index from photo files, and appending photos to one without recomputing the others.

Photos go through the content-addressed feature cache (``extract_features``: resumable, progress bar,
unreadable photos reported and skipped), then through the model's image head. Appending embeds only
the new photos: the old ones' embeddings are read back from the index. A collection that gets the compressed
structure (a memory budget it would not fit otherwise, ``max_memory``) is embedded ``EMBED_CHUNK`` photos at a
time straight into its vectors file (``chunked``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..csls.penalties import penalties_skipped, penalty_writer
from ..errors import DataError
from ..features.limits import DEFAULT_MAX_PIXELS
from ..util.arrays import normalize_rows
from .ann import choose_kind, new_hnsw, new_ivf, search_section, tune_ef_search, tune_nprobe
from .chunked import append_compressed, write_compressed_index
from .compressed import CHUNK_ROWS, choose_sub_quantizers
from .fingerprint import photo_fingerprint, similarity_name
from .store import (
    DEFAULT_EXACT_THRESHOLD,
    DEFAULT_RECALL_TARGET,
    HNSW,
    IVF,
    IVF_RETRAIN_GROWTH,
    IVFPQ,
    MANIFEST,
    PhotoEntry,
    PhotoIndex,
    index_lock,
    is_index_dir,
    model_section,
    now_iso,
    write_generation,
)

_ENCODE_CHUNK = 4096
EMBED_CHUNK = 50_000  # photos embedded at a time into a compressed index


@dataclass
class IndexReport:
    index: PhotoIndex
    added: int  # photos embedded into the index by this run
    already_indexed: int = 0  # given photos whose file was already in the index (skipped)
    failures: list[tuple[str, str]] = field(default_factory=list)  # (path, reason): unreadable photos
    extracted: int = 0  # features computed by the backbone in this run
    cached: int = 0  # features found in the feature cache
    seconds: float = 0.0


def stored_vectors(model, embeddings: np.ndarray) -> np.ndarray:
    """What the index stores for raw model embeddings: L2-normalised for cosine, as is otherwise."""
    x = np.ascontiguousarray(embeddings, dtype=np.float32)
    return normalize_rows(x) if similarity_name(model) == "cosine" else x


def embed_photo_files(
    model,
    paths: Sequence[str],
    cache_dir,
    *,
    batch_size: int = 32,
    num_workers: int = 0,
    progress: bool = True,
    strict: bool = False,
    max_pixels: int | None = DEFAULT_MAX_PIXELS,
):
    """(stored vectors of the readable photos, their positions in ``paths``, the FeatureResult)."""
    encoder = getattr(model, "image_encoder", None)
    if encoder is not None:  # ONNX Runtime, pixels to vectors (polyvse.features.onnx_encoder): no feature cache
        result = encoder.embed_files(
            paths,
            batch_size=batch_size,
            num_workers=num_workers,
            progress=progress,
            strict=strict,
            max_pixels=max_pixels,
        )
        return stored_vectors(model, result.vectors), result.index, result
    from ..features.cache import extract_features

    result = extract_features(
        list(paths),
        model.extractor,
        cache_dir,
        strict=strict,
        batch_size=batch_size,
        num_workers=num_workers,
        progress=progress,
        max_pixels=max_pixels,
    )
    feats = result.features
    parts = [model.encode_image_features(feats[i : i + _ENCODE_CHUNK]) for i in range(0, len(feats), _ENCODE_CHUNK)]
    emb = np.concatenate(parts) if parts else np.zeros((0, model.embed_dim), np.float32)
    return stored_vectors(model, emb), result.index, result


def checked_entries(
    root: Path,
    model,
    photos: Sequence[str | os.PathLike],
    names: Sequence[str] | None,
    kind: str,
    exact_threshold: int,
    overwrite: bool,
) -> list[tuple[str, str]]:
    """The checks every new index starts with (folder, settings, photos) -> the photo entries."""
    check_new_index(root, similarity_name(model), kind, exact_threshold, overwrite)
    entries = _entries(photos, names)
    if not entries:
        raise DataError("no photos to index")
    return entries


def _entries(photos: Sequence[str | os.PathLike], names: Sequence[str] | None) -> list[tuple[str, str]]:
    """(absolute path, shown name) per photo, duplicates (same absolute path) dropped, order kept."""
    if names is not None and len(names) != len(photos):
        raise ValueError("names must be as many as photos")
    out, seen = [], set()
    for i, p in enumerate(photos):
        path = os.path.abspath(os.fspath(p))
        if path in seen:
            continue
        seen.add(path)
        out.append((path, str(names[i]) if names is not None else os.path.basename(path)))
    return out


def _no_photo_read(n: int, failures) -> DataError:
    first = f" (first: {failures[0][0]}: {failures[0][1]})" if failures else ""
    return DataError(f"none of the {n} photos could be read{first}")


def _structure(
    similarity: str,
    vectors: np.ndarray,
    requested: str,
    exact_threshold: int,
    recall_target: float,
    existing=None,
    existing_search: dict | None = None,
    n_old: int = 0,
):
    """(faiss structure or None, manifest search section) for ``vectors`` of a model with this similarity.

    Appending to an IVF index adds the new rows to the trained lists (the lists are trained again once the
    index holds IVF_RETRAIN_GROWTH times what they were trained on); appending to an HNSW index inserts
    the new rows. Either way the search parameter is tuned again to the recall target.
    """
    kind = choose_kind(len(vectors), similarity, requested, exact_threshold)
    old_kind = (existing_search or {}).get("kind")
    common = dict(exact_threshold=exact_threshold, recall_target=recall_target)
    if kind == IVF:
        old = (existing_search or {}).get("ivf", {})
        if existing is not None and old_kind == IVF and len(vectors) <= IVF_RETRAIN_GROWTH * old["trained_on"]:
            ann, nlist, trained_on = existing, int(old["nlist"]), int(old["trained_on"])
            ann.add(np.ascontiguousarray(vectors[n_old:]))
        else:
            (ann, nlist), trained_on = new_ivf(vectors), len(vectors)
        nprobe, recall = tune_nprobe(ann, vectors, nlist, recall_target)
        return ann, search_section(kind, recall=recall, nlist=nlist, nprobe=nprobe, trained_on=trained_on, **common)
    if kind == HNSW:
        if existing is not None and old_kind == HNSW:
            ann = existing
            ann.add(np.ascontiguousarray(vectors[n_old:]))
        else:
            ann = new_hnsw(vectors.shape[1])
            ann.add(np.ascontiguousarray(vectors))
        ef, recall = tune_ef_search(ann, vectors, recall_target)
        return ann, search_section(kind, recall=recall, ef_search=ef, **common)
    return None, search_section(kind, **common)


def check_new_index(root: Path, similarity: str, kind: str, exact_threshold: int, overwrite: bool) -> None:
    """Refuse, before any work, a build request that cannot succeed or would clobber something."""
    if exact_threshold < 1:
        raise DataError(f"exact threshold must be at least 1, not {exact_threshold}")
    choose_kind(0, similarity, kind, exact_threshold)  # validate the requested kind
    if root.exists() and not root.is_dir():
        raise DataError("exists and is not a folder; give a folder for the index", root)
    if root.is_dir():
        if is_index_dir(root) and not overwrite:
            raise DataError(
                "is already an index; use `polyvse index add` to append photos, or --force to rebuild it from scratch",
                root,
            )
        if not is_index_dir(root) and any(not f.name.startswith(".") for f in root.iterdir()):
            raise DataError("folder is not empty and not an index; give a new or empty folder", root)


def write_new_index(
    root: Path,
    model_info: dict,
    similarity: str,
    photo_list: list[PhotoEntry],
    vectors: np.ndarray,
    kind: str,
    exact_threshold: int,
    recall_target: float,
    max_memory: int | None = None,
    csls=None,
) -> None:
    """Choose and build the search structure for ``vectors`` and commit them as a new index generation.

    The caller holds :func:`index_lock`. ``model_info`` is the manifest's model section (:func:`model_section`).
    ``max_memory``: the budget in bytes the structure must fit (recorded, so that appending keeps to it).
    ``csls``: the model's ``penalties.PenaltyWriter`` (a CSLS checkpoint's photo penalties are stored too).
    """
    chosen = choose_kind(len(vectors), similarity, kind, exact_threshold, dim=vectors.shape[1], max_memory=max_memory)
    if chosen == IVFPQ:
        chunks = (vectors[i : i + CHUNK_ROWS] for i in range(0, len(vectors), CHUNK_ROWS))
        write_compressed_index(
            root,
            model_info,
            photo_list,
            chunks,
            dim=vectors.shape[1],
            exact_threshold=exact_threshold,
            recall_target=recall_target,
            max_memory=max_memory,
            requested=kind,
            csls=csls,
        )
        return
    ann, search = _structure(similarity, vectors, kind, exact_threshold, recall_target)
    _record_request(search, kind, max_memory)
    manifest = {"model": model_info, "search": search, "created": now_iso()}
    write_generation(root, manifest, photo_list, vectors, ann, csls=csls)


def _record_request(search: dict, requested: str, max_memory: int | None) -> None:
    """What the next append re-chooses the structure with: the requested kind and the memory budget."""
    search["requested"] = requested
    if max_memory is not None:
        search["max_memory"] = int(max_memory)


def build_index(
    model,
    photos: Sequence[str | os.PathLike],
    out: str | os.PathLike,
    *,
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
    backend: str = "faiss",
    uri: str | None = None,
    collection: str | None = None,
    db_name: str | None = None,
    csls_penalties: bool = True,
    csls_penalty_langs: Sequence[str] | None = None,
) -> IndexReport:
    """Embed ``photos`` with ``model`` into a new index folder ``out`` (see polyvse.index.store for the layout).
    ``max_memory``: a budget in bytes for the search structure and photo entries (compressed beyond it).
    ``csls_penalties=False``: a CSLS checkpoint's photo penalties are not stored (polyvse.csls.penalties: searches
    then compute them per query), for builds too large to spend the time on them; ``csls_penalty_langs``: stored only
    for queries in these languages (default: every language's bank).
    ``backend="milvus"``: the photos go to a Milvus collection (``uri``: a server, or a milvus-lite .db file; see
    polyvse.index.milvus), the folder keeps the manifest."""
    from .milvus import check_milvus_build, target_for

    t0 = time.time()
    root = Path(out)
    target = target_for(backend, uri, collection, root, db_name)
    entries = checked_entries(root, model, photos, names, kind, exact_threshold, overwrite)
    if target is not None:
        check_milvus_build(target, similarity_name(model), kind, max_memory, overwrite)
    embed = dict(
        batch_size=batch_size, num_workers=num_workers, progress=progress, strict=strict, max_pixels=max_pixels
    )
    compressed = (
        choose_kind(
            len(entries), similarity_name(model), kind, exact_threshold, dim=model.embed_dim, max_memory=max_memory
        )
        == IVFPQ
    )
    structure = dict(
        kind=kind,
        exact_threshold=exact_threshold,
        recall_target=recall_target,
        max_memory=max_memory,
        csls_penalties=csls_penalties,
        csls_penalty_langs=csls_penalty_langs,
    )
    with index_lock(root):
        if compressed:
            report = _build_compressed(model, root, entries, cache_dir, embed, checkpoint_path, **structure)
        else:
            report = _build_in_memory(model, root, entries, cache_dir, embed, checkpoint_path, target, **structure)
    report.seconds = time.time() - t0
    return report


def _build_in_memory(
    model,
    root: Path,
    entries: list[tuple[str, str]],
    cache_dir,
    embed: dict,
    checkpoint_path,
    target,
    kind: str,
    exact_threshold: int,
    recall_target: float,
    max_memory: int | None,
    csls_penalties: bool,
    csls_penalty_langs: Sequence[str] | None,
) -> IndexReport:
    """build_index for an exact or HNSW structure, or a Milvus ``target``: every photo embedded, then written at
    once."""
    from .milvus import write_milvus_index

    vectors, ok, result = embed_photo_files(model, [p for p, _ in entries], cache_dir, **embed)
    if len(ok) == 0:
        raise _no_photo_read(len(entries), result.failures)
    kept = [entries[int(i)] for i in ok]
    photo_list = [PhotoEntry(i, name, path) for i, (path, name) in enumerate(kept)]
    if target is not None:
        write_milvus_index(
            root,
            target,
            model_section(model, checkpoint_path),
            photo_list,
            vectors,
            kind,
            exact_threshold,
            recall_target,
        )
    else:
        write_new_index(
            root,
            model_section(model, checkpoint_path),
            similarity_name(model),
            photo_list,
            vectors,
            kind,
            exact_threshold,
            recall_target,
            max_memory,
            csls=penalty_writer(model, max_memory, store=csls_penalties, langs=csls_penalty_langs),
        )
    return IndexReport(
        PhotoIndex.open(root),
        added=len(photo_list),
        failures=result.failures,
        extracted=result.extracted,
        cached=result.cached,
    )


def _build_compressed(
    model,
    root: Path,
    entries: list[tuple[str, str]],
    cache_dir,
    embed: dict,
    checkpoint_path,
    kind: str,
    exact_threshold: int,
    recall_target: float,
    max_memory: int | None,
    csls_penalties: bool = True,
    csls_penalty_langs: Sequence[str] | None = None,
) -> IndexReport:
    """build_index for the compressed structure: photos embedded EMBED_CHUNK at a time into the vectors file."""
    choose_sub_quantizers(len(entries), model.embed_dim, max_memory)  # a budget too small: refused before any work
    photo_list: list[PhotoEntry] = []
    report = IndexReport(None, added=0)  # type: ignore[arg-type]  (the index is opened at the end)

    def chunks():
        for start in range(0, len(entries), EMBED_CHUNK):
            part = entries[start : start + EMBED_CHUNK]
            vectors, ok, result = embed_photo_files(model, [p for p, _ in part], cache_dir, **embed)
            report.failures += result.failures
            report.extracted += result.extracted
            report.cached += result.cached
            base = len(photo_list)
            photo_list.extend(PhotoEntry(base + j, part[int(i)][1], part[int(i)][0]) for j, i in enumerate(ok))
            yield vectors
        if not photo_list:
            raise _no_photo_read(len(entries), report.failures)

    write_compressed_index(
        root,
        model_section(model, checkpoint_path),
        photo_list,
        chunks(),
        dim=model.embed_dim,
        exact_threshold=exact_threshold,
        recall_target=recall_target,
        max_memory=max_memory,
        requested=kind,
        csls=penalty_writer(model, max_memory, store=csls_penalties, langs=csls_penalty_langs),
    )
    report.index, report.added = PhotoIndex.open(root), len(photo_list)
    return report


def _append(
    root: Path,
    index: PhotoIndex,
    model,
    new_entries: list[PhotoEntry],
    vectors: np.ndarray,
    checkpoint_path,
    csls_penalties: bool | None = None,
    csls_penalty_langs: Sequence[str] | None = None,
) -> None:
    """Commit the next generation of ``index`` with ``new_entries`` and their ``vectors``, the structure re-chosen
    for the new size under the recorded request and memory budget. ``csls_penalties``: store a CSLS checkpoint's
    photo penalties (None: unless the index was built without them, --no-csls-penalties); ``csls_penalty_langs``:
    for these languages (None: the languages the index stores them for, else all)."""
    old_search = index.manifest["search"]
    requested, max_memory = old_search.get("requested", "auto"), old_search.get("max_memory")
    model_info = dict(index.manifest["model"])
    # an index older than recorded photo sides accepted this model by its legacy fingerprint: same photo side
    model_info.setdefault("photo_fingerprint", photo_fingerprint(model))
    if checkpoint_path:
        model_info["checkpoint"] = str(Path(checkpoint_path).resolve())
    if hasattr(index, "append"):  # a Milvus collection (polyvse.index.milvus) appends itself; CSLS per query
        index.append(root, new_entries, vectors, model_info)
        return
    if csls_penalties is None:
        csls_penalties = not penalties_skipped(index.manifest)
    # the indexed photos' penalties are copied where stored, not recomputed
    csls = penalty_writer(model, max_memory, old=index, store=csls_penalties, langs=csls_penalty_langs)
    n_total = index.count + len(new_entries)
    if (
        index.kind == IVFPQ
        or choose_kind(
            n_total,
            similarity_name(model),
            requested,
            int(old_search["exact_threshold"]),
            dim=index.dim,
            max_memory=max_memory,
        )
        == IVFPQ
    ):
        append_compressed(root, index, new_entries, vectors, model_info, requested, max_memory, csls=csls)
        return
    all_vectors = np.concatenate([np.asarray(index.vectors, dtype=np.float32), vectors])
    ann, search = _structure(
        similarity_name(model),
        all_vectors,
        requested,
        int(old_search["exact_threshold"]),
        float(old_search["recall_target"]),
        existing=index._ann,
        existing_search=old_search,
        n_old=index.count,
    )
    _record_request(search, requested, max_memory)
    manifest = {"model": model_info, "search": search, "created": index.manifest.get("created", now_iso())}
    write_generation(root, manifest, index.photos + new_entries, all_vectors, ann, csls=csls)


def add_to_index(
    model,
    index_dir: str | os.PathLike,
    photos: Sequence[str | os.PathLike],
    *,
    cache_dir,
    names: Sequence[str] | None = None,
    checkpoint_path: str | os.PathLike | None = None,
    batch_size: int = 32,
    num_workers: int = 0,
    progress: bool = True,
    strict: bool = False,
    max_pixels: int | None = DEFAULT_MAX_PIXELS,
    csls_penalties: bool | None = None,
    csls_penalty_langs: Sequence[str] | None = None,
) -> IndexReport:
    """Append photos not yet in the index (by absolute path); the indexed ones are not recomputed.
    ``csls_penalties``: store a CSLS checkpoint's photo penalties (True: every photo's, those already stored copied),
    skip them (False), or as the index was built (None: skipped when its manifest says so, else stored);
    ``csls_penalty_langs``: for queries in these languages (None: those the index stores them for, else all).

    The search structure is re-chosen for the new size: an exact index that grows past its threshold
    becomes IVF (trained on the stored vectors); an IVF or HNSW index gets the new vectors added, and its
    nprobe / efSearch is tuned again to the recall target.
    """
    t0 = time.time()
    root = Path(index_dir)
    if not (root / MANIFEST).is_file():
        PhotoIndex.open(root)  # raises the error that says what is wrong with the folder
    with index_lock(root):
        index = PhotoIndex.open(root)
        index.check_model(model)
        known = index.ids_of_paths()
        entries = _entries(photos, names)
        fresh = [(p, n) for p, n in entries if p not in known]
        skipped = len(entries) - len(fresh)
        if not fresh:
            return IndexReport(index, added=0, already_indexed=skipped, seconds=time.time() - t0)
        vectors, ok, result = embed_photo_files(
            model,
            [p for p, _ in fresh],
            cache_dir,
            batch_size=batch_size,
            num_workers=num_workers,
            progress=progress,
            strict=strict,
            max_pixels=max_pixels,
        )
        if len(ok) == 0:
            raise _no_photo_read(len(fresh), result.failures)
        new_entries = [PhotoEntry(index.count + j, fresh[int(i)][1], fresh[int(i)][0]) for j, i in enumerate(ok)]
        _append(root, index, model, new_entries, vectors, checkpoint_path, csls_penalties, csls_penalty_langs)
    return IndexReport(
        PhotoIndex.open(root),
        added=len(new_entries),
        already_indexed=skipped,
        failures=result.failures,
        extracted=result.extracted,
        cached=result.cached,
        seconds=time.time() - t0,
    )
