"""Each indexed photo's CSLS penalty r_C, stored with the index of a CSLS checkpoint.

A CSLS checkpoint ranks text->photo by 2 cos(i, c) - r_C(i, L) - r_I(c) (polyvse.similarity.csls_scoring). r_C(i, L),
photo i's mean cosine to its k nearest captions of language L's bank, depends only on the photo and the model's
banks, not on the query; computed per query it costs each candidate a scan of the whole caption bank (and a fresh
search process the read of that bank). So `polyvse index build` and `polyvse index add` compute it once per photo
and bank key (every language's bank, then the pooled bank '*' that scores languages without one) and store

    penalties.<g>.npy    float32 (n_photos, n_keys), memory-mapped on open, written atomically with the generation

with the manifest's ``csls`` section: its ``keys`` (the columns), ``k``, ``banks`` (``SearchHubness.digest``: the
banks they were computed with) and ``seconds`` (what computing them added to the build). A search takes the
candidates' rows when the digest is its model's (``stored_penalties``), else computes r_C as before.

Rows are computed ``chunk_rows`` at a time, read from a vectors file by plain reads (``compressed.read_block``), so a
build under ``--max-memory`` holds one chunk's similarities to the largest bank at a time (within 1/CHUNK_SHARE of
its budget), besides the banks themselves, and writes each chunk to the file as it comes. An append copies the
rows of the photos already indexed when their section matches, and computes only the new photos'.
The merge of a sharded build (no model loaded) reads the banks of the checkpoint the shards recorded
(``recorded_penalty_writer``); a checkpoint replaced since has other banks, whose digest then fails to match the
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

import time
from pathlib import Path
from typing import Callable

import numpy as np

from ..errors import DataError
from ..util.atomic import atomic_path
from .compressed import CHUNK_SHARE, read_block

__all__ = ["CHUNK_ROWS", "SKIPPED", "PenaltyWriter", "penalty_writer", "penalties_skipped", "recorded_penalty_writer",
           "stored_keys", "stored_penalties"]

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
            raise DataError(f"no caption bank {unknown or self.keys} to store CSLS penalties for: the model's banks "
                            f"are {', '.join(hubness.penalty_keys)}")
        self.reused = (old.penalties if old is not None and stored_penalties(old, hubness) is not None
                       and stored_keys(old.manifest) == self.keys else None)

    def __call__(self, root: Path, gen: int, vectors: np.ndarray) -> tuple[dict, dict]:
        """Write ``penalties.<gen>.npy`` for every row of ``vectors``; (its files entries, the ``csls`` section)."""
        t0 = time.time()
        keys = self.keys
        n = len(vectors)
        start = 0 if self.reused is None else min(len(self.reused), n)
        step = chunk_rows(self.hubness, self.budget, keys)

        def write(tmp: str) -> None:
            with open(tmp, "wb") as fh:
                np.lib.format.write_array_header_1_0(fh, {"descr": "<f4", "fortran_order": False,
                                                          "shape": (n, len(keys))})
                for i in range(0, start, step):  # the photos already indexed: their rows as stored
                    fh.write(read_block(self.reused, i, min(i + step, start)).tobytes())
                for i in range(start, n, step):
                    rows = self.hubness.penalty_table(read_block(vectors, i, min(i + step, n)), keys)
                    fh.write(rows.astype("<f4", copy=False).tobytes())

        name = f"penalties.{gen}.npy"
        with atomic_path(root / name, suffix=".tmp") as tmp:
            write(str(tmp))
            size = tmp.stat().st_size
        section = {"keys": keys, "k": self.hubness.k, "banks": self.hubness.digest(),
                   "seconds": round(time.time() - t0, 3)}
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


def _writer(hubness, budget, old, store: bool, langs):
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
    from ..model.search_hubness import SearchHubness
    from .fingerprint import similarity_name

    hubness = SearchHubness.of_model(model) if similarity_name(model) == "cosine" else None
    if hubness is None:
        return None
    return _writer(hubness, budget, old, store, langs)


def recorded_penalty_writer(model_info: dict, budget: int | None = None, store: bool = True, langs=None):
    """The r_C writer of the CSLS checkpoint a manifest's model section records (its banks read from the weights
    file, without torch), None when it records none, the folder is gone or unreadable, or it does not score with
    CSLS; ``SKIPPED`` for such a checkpoint when not ``store``; ``langs`` as for ``penalty_writer``."""
    from ..errors import CheckpointError
    from ..model.checkpoint import HubnessBankFile, read_checkpoint_config
    from ..model.search_hubness import SearchHubness

    path = model_info.get("checkpoint")
    try:
        cfg = read_checkpoint_config(path) if path else None
        if cfg is None or not cfg.retrieval or model_info.get("similarity") != "cosine":
            return None
        if not store:
            return SKIPPED
        return _writer(SearchHubness.from_bank_file(cfg.retrieval["k"], HubnessBankFile(cfg.weights)), budget, None,
                       True, langs)
    except (CheckpointError, DataError, OSError):
        return None


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
        raise DataError(f"{name} holds {table.shape} {table.dtype}, the manifest says ({n}, {len(keys)}) float32; "
                        "the index is damaged, rebuild it", root)
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
