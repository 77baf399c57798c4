"""Writing and appending to a compressed index (``ivfpq``) in chunks: no step holds every float vector in memory.

    write_compressed_index(root, model_info, photos, chunks)   a new index from vector chunks (build, benchmarks)
    append_compressed(root, index, new_entries, vectors)        ``polyvse index add`` on one (or on an exact / IVF
                                                                index that outgrows its memory budget)

The vectors go to the generation's raw file (``vectors.<g>.f32``) as they come; the structure is then trained on a
sample of it and filled from it in chunks (``compressed.new_structure``), its nprobe and re-ranking depth tuned to
the recall target against a chunked exact scan (``ann.tune_compressed``), and the generation committed
(``store.write_generation``). The caller holds the index lock.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from ..errors import DataError
from .ann import search_section, tune_compressed
from .compressed import CHUNK_ROWS, VectorsFile, add_rows, choose_sub_quantizers, chunk_rows, new_structure
from .store import IVF_RETRAIN_GROWTH, IVFPQ, PhotoEntry, PhotoIndex, next_generation, now_iso, write_generation


def compressed_structure(
    vectors: np.ndarray,
    *,
    exact_threshold: int,
    recall_target: float,
    max_memory: int | None = None,
    existing=None,
    existing_search: dict | None = None,
    n_old: int = 0,
):
    """(compressed structure over ``vectors``, the manifest's search section). An existing compressed structure
    gets rows ``n_old:`` added, unless the index has grown IVF_RETRAIN_GROWTH times past what its lists were
    trained on: then (or without one) a new one is trained, with the finest codes that fit ``max_memory``, on a
    sample and in chunks that keep the build within it (``compressed.train_rows``, ``compressed.chunk_rows``)."""
    old = (existing_search or {}).get("ivfpq")
    n, dim = vectors.shape
    if existing is not None and old and n <= IVF_RETRAIN_GROWTH * int(old["trained_on"]):
        ann, nlist, trained_on, m = existing, int(old["nlist"]), int(old["trained_on"]), int(old["sub_quantizers"])
        add_rows(ann, vectors, n_old, chunk_rows(dim, max_memory))
    else:
        m = choose_sub_quantizers(n, dim, max_memory)
        (ann, nlist), trained_on = new_structure(vectors, m, budget=max_memory), n
    nprobe, depth, recall = tune_compressed(ann, vectors, nlist, recall_target, budget=max_memory)
    return ann, search_section(
        IVFPQ,
        exact_threshold=exact_threshold,
        recall_target=recall_target,
        recall=recall,
        nlist=nlist,
        nprobe=nprobe,
        trained_on=trained_on,
        sub_quantizers=m,
        depth=depth,
        max_memory=max_memory,
    )


def write_compressed_index(
    root: Path,
    model_info: dict,
    photos: Iterable[PhotoEntry],
    chunks: Iterable[np.ndarray],
    *,
    dim: int,
    exact_threshold: int,
    recall_target: float,
    max_memory: int | None = None,
    requested: str = "auto",
    csls=None,
) -> dict:
    """A new generation of ``root`` with the compressed structure over the rows of ``chunks`` (float32 arrays of
    ``dim`` columns, stored as given: normalise them first for a cosine model). ``photos`` is read after the chunks
    (it may be filled while they are produced) and must hold one entry per row. ``csls``: a CSLS checkpoint's
    ``penalties.PenaltyWriter`` (computed from the vectors file in chunks, within ``max_memory``). Returns the
    manifest."""
    root.mkdir(parents=True, exist_ok=True)
    gen = next_generation(root)
    vectors = VectorsFile.create(root / f"vectors.{gen}.f32", dim)
    for chunk in chunks:
        vectors.append(chunk)
    if vectors.count == 0:
        raise DataError("no vectors to index")
    ann, search = compressed_structure(
        vectors.rows(), exact_threshold=exact_threshold, recall_target=recall_target, max_memory=max_memory
    )
    search["requested"] = requested
    manifest = {"model": model_info, "search": search, "created": now_iso()}
    return write_generation(root, manifest, photos, vectors, ann, generation=gen, csls=csls)


def append_compressed(
    root: Path,
    index: PhotoIndex,
    new_entries: Sequence[PhotoEntry],
    vectors: np.ndarray,
    model_info: dict,
    requested: str,
    max_memory: int | None,
    csls=None,
) -> dict:
    """The next generation of ``index``: its photos and ``new_entries``, the compressed structure over its vectors
    and the new ``vectors``. A compressed index's vectors file is extended in place (hard link + append); another
    kind's vectors are copied into a new one, chunk by chunk. Returns the manifest."""
    gen = next_generation(root)
    target = root / f"vectors.{gen}.f32"
    old_search = index.manifest["search"]
    if index.kind == IVFPQ:
        store = VectorsFile.extend(root / index.manifest["files"]["vectors"], target, index.dim, index.count)
        existing = index._ann
    else:
        store, existing = VectorsFile.create(target, index.dim), None
        for i in range(0, index.count, CHUNK_ROWS):
            store.append(index.vectors[i : i + CHUNK_ROWS])
    store.append(vectors)
    ann, search = compressed_structure(
        store.rows(),
        exact_threshold=int(old_search["exact_threshold"]),
        recall_target=float(old_search["recall_target"]),
        max_memory=max_memory,
        existing=existing,
        existing_search=old_search,
        n_old=index.count,
    )
    search["requested"] = requested
    manifest = {"model": model_info, "search": search, "created": index.manifest.get("created", now_iso())}
    return write_generation(root, manifest, [*index.photos, *new_entries], store, ann, generation=gen, csls=csls)
