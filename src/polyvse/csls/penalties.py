"""Each indexed photo's CSLS penalty r_C, stored with the index of a CSLS checkpoint.

A CSLS checkpoint ranks text->photo by 2 cos(i, c) - r_C(i, L) - r_I(c) (polyvse.csls.scoring). r_C(i, L),
photo i's mean cosine to its k nearest captions of language L's bank, depends only on the photo and the model's
banks, not on the query; computed per query it costs each candidate a scan of the whole caption bank (and a fresh
search process the read of that bank). So `polyvse index build` and `polyvse index add` compute it once per photo
and bank key (every language's bank, then the pooled bank '*' that scores languages without one) and store

    penalties.<g>.npy    float32 (n_photos, n_keys), memory-mapped on open, written atomically with the generation

with the manifest's ``csls`` section: its ``keys`` (the columns), ``k``, ``banks`` (``SearchHubness.digest``: the
banks they were computed with) and ``seconds`` (what computing them added to the build). A search takes the
candidates' rows when the digest is its model's (``stored_penalties``), else computes r_C as before.

Rows are computed ``chunk_rows`` at a time, read from a vectors file by plain reads (``polyvse.util.blocks.read_block``), so a
build under ``--max-memory`` holds one chunk's similarities to the largest bank at a time (within 1/CHUNK_SHARE of
its budget), besides the banks themselves, and writes each chunk to the file as it comes. An append copies the
rows of the photos already indexed when their section matches, and computes only the new photos'.
The merge of a sharded build (no model loaded) reads the banks of the checkpoint the shards recorded
(``polyvse.index.shards.recorded_penalty_writer``); a checkpoint replaced since has other banks, whose digest then fails to match the
model that embedded the photos, so its searches compute r_C as without a table. Milvus indexes store none: their
searches compute r_C per query.

A very large build may skip them (`polyvse index build --no-csls-penalties`: at 10M photos they would add an hour
and more on two cores): no table is written, the ``csls`` section is ``{"skipped": true}`` (``SKIPPED``), and
searches compute r_C per query as for an index without a table. Or it may store the columns of the languages it
will be searched in (`--csls-penalty-langs en,de`: ``keys`` lists only those banks, the pooled one where a language
has no bank of its own; a bank costs each photo a scan of it, so one language of five costs a fifth): a query in
another language computes its candidates' r_C. `polyvse index add` keeps an index's choice unless told otherwise.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..errors import DataError
from ..util.atomic import atomic_path
from ..util.blocks import CHUNK_SHARE, read_block
from .search import SearchHubness

log = logging.getLogger(__name__)
#: a compressed index's kind (polyvse.index.store.IVFPQ): its search re-ranks the candidates the prior lifts too
IVFPQ = "ivfpq"

__all__ = [
    "CHUNK_ROWS",
    "SKIPPED",
    "PenaltyWriter",
    "csls_search",
    "penalty_writer",
    "penalties_skipped",
    "stored_keys",
    "stored_penalties",
    "writer_of",
]

#: photos whose r_C is computed at once without a budget: 1024 x a 6,000-caption bank is 25 MB of similarities a copy
CHUNK_ROWS = 1024
MIN_CHUNK_ROWS = 64


def chunk_rows(hubness, budget: int | None = None, keys: list[str] | None = None) -> int:
    """Photos scored at a time: CHUNK_ROWS, fewer where their rows, their similarities to the largest bank (three
    copies at once: the products, their negation, its partition) and the k best of each bank would pass
    1/CHUNK_SHARE of ``budget``."""
    if budget is None:
        return CHUNK_ROWS
    keys = hubness.penalty_keys if keys is None else keys
    largest = max(len(hubness.caption_bank(lang)) for lang in hubness.penalty_keys[:-1])
    per_row = 4 * (3 * largest + hubness.k * (len(hubness.penalty_keys) + len(keys)) + hubness.photos.shape[1])
    return int(min(CHUNK_ROWS, max(MIN_CHUNK_ROWS, budget // CHUNK_SHARE // per_row)))


class PenaltyWriter:
    """Writes the r_C table of a generation (``write_generation``'s ``csls`` hook): ``hubness`` is the model's
    SearchHubness, ``old`` the index being appended to (its matching rows are copied, not computed again), ``keys``
    the bank keys stored (default every one of ``hubness.penalty_keys``; ``hubness.penalty_columns`` gives a
    language list's)."""

    def __init__(self, hubness, budget: int | None = None, old=None, keys: list[str] | None = None):
        self.hubness, self.budget = hubness, budget
        self.keys = list(hubness.penalty_keys if keys is None else keys)
        unknown = [key for key in self.keys if key not in hubness.penalty_keys]
        if unknown or not self.keys:
            raise DataError(
                f"no caption bank {unknown or self.keys} to store CSLS penalties for: the model's banks "
                f"are {', '.join(hubness.penalty_keys)}"
            )
        self.reused = (
            old.penalties
            if old is not None and stored_penalties(old, hubness) is not None and stored_keys(old.manifest) == self.keys
            else None
        )

    def __call__(self, root: Path, gen: int, vectors: np.ndarray) -> tuple[dict, dict]:
        """Write ``penalties.<gen>.npy`` for every row of ``vectors``; (its files entries, the ``csls`` section)."""
        t0 = time.time()
        keys = self.keys
        n = len(vectors)
        start = 0 if self.reused is None else min(len(self.reused), n)
        step = chunk_rows(self.hubness, self.budget, keys)

        def write(tmp: str) -> None:
            with open(tmp, "wb") as fh:
                np.lib.format.write_array_header_1_0(
                    fh, {"descr": "<f4", "fortran_order": False, "shape": (n, len(keys))}
                )
                for i in range(0, start, step):  # the photos already indexed: their rows as stored
                    fh.write(read_block(self.reused, i, min(i + step, start)).tobytes())
                for i in range(start, n, step):
                    rows = self.hubness.penalty_table(read_block(vectors, i, min(i + step, n)), keys)
                    fh.write(rows.astype("<f4", copy=False).tobytes())

        name = f"penalties.{gen}.npy"
        with atomic_path(root / name, suffix=".tmp") as tmp:
            write(str(tmp))
            size = tmp.stat().st_size
        section = {
            "keys": keys,
            "k": self.hubness.k,
            "banks": self.hubness.digest(),
            "seconds": round(time.time() - t0, 3),
        }
        return {"penalties": name, "penalties_bytes": size}, section


def _skip_penalties(root: Path, gen: int, vectors: np.ndarray) -> tuple[dict, dict]:
    """``write_generation``'s ``csls`` hook of a build told to skip the table: no file, the section says so."""
    return {}, {"skipped": True}


#: the ``csls`` hook of a CSLS checkpoint's build without the r_C table (--no-csls-penalties)
SKIPPED = _skip_penalties


def penalties_skipped(manifest: dict) -> bool:
    """Whether the index was built (or last appended to) with the r_C table skipped (--no-csls-penalties)."""
    return bool((manifest.get("csls") or {}).get("skipped"))


def stored_keys(manifest: dict) -> list[str] | None:
    """The bank keys an index stores r_C for (its table's columns), None where it stores none."""
    section = manifest.get("csls") or {}
    return None if section.get("skipped") else section.get("keys")


def writer_of(hubness, budget, old, store: bool, langs):
    """The writer of ``hubness``'s table: ``langs`` given, their columns; else those ``old`` stores (an append
    keeps the index's choice), else every bank's."""
    if not store:
        return SKIPPED
    keys = hubness.penalty_columns(langs) if langs is not None else None
    if keys is None and old is not None and stored_keys(old.manifest):
        kept = [key for key in stored_keys(old.manifest) if key in hubness.penalty_keys]
        keys = kept or None
    return PenaltyWriter(hubness, budget, old, keys)


def penalty_writer(model, budget: int | None = None, old=None, store: bool = True, langs=None):
    """The writer of ``model``'s r_C table, None for a model that does not score with CSLS; ``SKIPPED`` when not
    ``store`` (the manifest then says the table was skipped). ``langs``: store only the columns that score queries
    in these languages (default: those ``old`` stores, else every bank's)."""
    hubness = SearchHubness.of_model(model) if model.similarity_name == "cosine" else None
    if hubness is None:
        return None
    return writer_of(hubness, budget, old, store, langs)


def open_penalties(root: Path, manifest: dict, n: int) -> np.ndarray | None:
    """The generation's r_C table, memory-mapped, or None where the manifest names none."""
    files, section = manifest["files"], manifest.get("csls")
    name = files.get("penalties")
    if not name:
        return None
    path = root / name
    try:
        table = np.load(path, mmap_mode="r", allow_pickle=False)
    except FileNotFoundError:
        raise
    except Exception as exc:  # noqa: BLE001 - numpy raises several types for damaged files
        raise DataError(f"unreadable CSLS penalties file {name} ({exc}); rebuild the index", root) from None
    keys = (section or {}).get("keys") or []
    if table.dtype != np.float32 or table.shape != (n, len(keys)):
        raise DataError(
            f"{name} holds {table.shape} {table.dtype}, the manifest says ({n}, {len(keys)}) float32; "
            "the index is damaged, rebuild it",
            root,
        )
    return table


def stored_penalties(index, hubness) -> Callable[[str | None], int | None] | None:
    """Where ``index`` stores r_C for ``hubness``'s banks: a function from a query language to its column (None for a
    language whose bank the index stores no column for, --csls-penalty-langs); None when it stores none, or stores
    them for other banks or another k."""
    table, section = getattr(index, "penalties", None), index.manifest.get("csls") or {}
    keys = section.get("keys") or []
    if table is None or section.get("k") != hubness.k or not set(keys) <= set(hubness.penalty_keys):
        return None
    if section.get("banks") != hubness.digest():
        return None
    columns = {key: j for j, key in enumerate(keys)}
    return lambda lang: columns.get(hubness.key_of(lang))


def csls_search(
    index, hubness: SearchHubness, queries: np.ndarray, k: int, lang: str | None, rerank_for: int | None = None
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(CSLS scores, ids) per unit caption row of ``queries`` in ``lang``, best first: the index's cosine top
    ``hubness.fetch(k)`` re-ranked by CSLS with their stored vectors (how a CSLS model's text search ranks;
    benchmarks/bench_scale.py times this same call). The candidates' r_C is read from the index where it stores
    it for these banks (polyvse.csls.penalties), else computed against the caption bank (with a hint, once).
    ``rerank_for``: the tuned_for of the index's search (default k; benchmarks sweep it). With stored penalties,
    half the r_C column is the search's prior: a compressed index also reads the candidates CSLS may lift."""
    columns = stored_penalties(index, hubness)
    column = None if columns is None else columns(lang)
    if column is None:
        _hint_rebuild(index, lang if columns is not None else None)
    # a compressed index re-ranks the candidates of a top-``rerank_for`` search, and those the prior lifts
    prior = _half_penalties(index, column) if column is not None and getattr(index, "kind", None) == IVFPQ else None
    scores, ids = index.search(queries, hubness.fetch(k), tuned_for=rerank_for or k, prior=prior)
    out = []
    for q, row in zip(np.atleast_2d(queries), ids):
        vectors = index.vectors_of(row)
        penalty = None if column is None else index.penalties[np.asarray(row, dtype=np.int64), column]
        out.append(hubness.rerank(q, row, vectors, lang, k, photo_penalty=penalty))
    return [s for s, _ in out], [i for _, i in out]


def _half_penalties(index, column: int) -> np.ndarray:
    """Half the stored r_C column (CSLS = 2 cos - r_C - r_T ranks as cos - r_C / 2), read whole once per opened
    index: 40 MB at 10M photos, where the memory map would fault a page per candidate of every query."""
    cache = index.__dict__.setdefault("_half_penalties", {})
    if column not in cache:
        cache[column] = np.asarray(index.penalties[:, column], dtype=np.float32) / 2
    return cache[column]


def _hint_rebuild(index, lang: str | None = None) -> None:
    """Say once per opened index (and query language, where it stores other languages' columns) why its CSLS
    searches are slower than they could be (not for a Milvus collection, whose searches always compute them:
    polyvse.csls.penalties)."""
    hinted = index.__dict__.setdefault("_csls_hints", set())
    if lang in hinted or hasattr(index, "append"):
        return
    hinted.add(lang)
    if lang is not None:
        log.warning(
            "%s: each %s query computes its candidates' CSLS penalties, as the index stores them for other "
            "languages only (--csls-penalty-langs); `polyvse index build --force` with %s among them stores "
            "its",
            index.root,
            lang,
            lang,
        )
        return
    why = (
        "stores them for other banks"
        if index.penalties is not None
        else "was built without them (--no-csls-penalties)"
        if penalties_skipped(index.manifest)
        else "was built without them"
    )
    log.warning(
        "%s: each query computes its candidates' CSLS penalties, as the index %s; rebuild it "
        "(`polyvse index build --force`) to store them",
        index.root,
        why,
    )
