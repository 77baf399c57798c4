"""The on-disk photo index: embeddings + a FAISS structure + photo ids and paths + a manifest.

Layout of an index folder (``<g>`` is the generation, bumped by every build and every append)::

    manifest.json        format, model fingerprint, search structure, recall target, files of generation g
    vectors.<g>.npy      float32 (n, dim): the photos' embeddings (L2-normalised for cosine models)
    vectors.<g>.f32      the same as raw float32 rows, for the compressed structure (memory-mapped, appended to)
    photos.<g>.jsonl     one line per photo: {"id": row, "name": shown name, "path": absolute file path}
    ann.<g>.faiss        the IVF, HNSW or compressed structure (only when the index is approximate)
    penalties.<g>.npy    float32 (n, keys): each photo's CSLS penalty r_C per caption bank, for a CSLS checkpoint
                         (polyvse.csls.penalties; the manifest's ``csls`` section says for which banks)
    .lock                taken while a build or an append writes

Integrity: the manifest records each file's size and SHA-256 (``files["sha256"]``: ``[end byte, digest]`` segments,
one per file, one per append for the raw vectors file, which an append extends in place) and its modification time
(``files["mtime_ns"]``). Opening checks every size, the photo list's digest (it is read whole anyway), and the
other files' digests when their modification time is not the recorded one; each only when the file is small enough
to hash at once (``CHECK_AT_OPEN_BYTES``: memory-mapped vectors are never read whole to open an index). All of them on
``verify_index`` (`polyvse index verify`). A manifest written before digests were recorded opens as before, sizes
checked.

Atomicity: the files of a new generation are written under new names (temp file + fsync + rename),
and only then is ``manifest.json`` replaced (again temp file + rename). The manifest is the single
commit point: a killed build or append leaves the previous generation in force, never a half-written
index. Files of older generations are removed after the switch.

Search structures (chosen at build time, re-chosen on every append):
    exact        FAISS IndexFlatIP over L2-normalised vectors: exact cosine search. Used below
                 ``exact_threshold`` photos (default 20,000).
    ivf          FAISS IVF-Flat (inner product; nlist = min(4 sqrt(n), n / 39) lists trained by k-means)
                 at or above the threshold: approximate, with ``nprobe`` tuned at build time until
                 recall@10 against exact search reaches the recall target (default 0.95) on two sets of
                 256 probe queries, the lower counting (midpoints of pairs of indexed photos, and indexed
                 photos that leave themselves out: ``ann.probe_sets``). The measured recall
                 is stored in the manifest. IVF is the default because it builds in seconds where HNSW
                 takes many minutes on a 2-core machine.
    hnsw         FAISS IndexHNSWFlat (inner product), on request (kind="hnsw"): ``efSearch`` tuned the
                 same way.
    ivfpq        for collections beyond a memory budget (``max_memory``, `polyvse index build --max-memory 8GB`)
                 or on request: IVF lists of 4-bit PQ codes in memory, the top candidates re-ranked from the
                 full vectors memory-mapped on disk (``compressed``); ``nprobe`` and the re-ranking depth tuned
                 to the recall target, the measured recall in the manifest.
    exact-model  for models whose similarity is not cosine (e.g. order embeddings, which no inner
                 product index can rank): every photo is scored with the model's own similarity.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._version import __version__
from ..csls.penalties import open_penalties
from ..errors import CheckpointError, DataError
from ..util.atomic import DiskFullError, atomic_path, disk_full_error, fsync_dir, is_disk_full
from .compressed import VectorsFile, open_rows, rerank_search
from .defaults import DEFAULT_EXACT_THRESHOLD, DEFAULT_RECALL_TARGET  # noqa: F401  (re-exported)
from .fingerprint import legacy_fingerprint, model_fingerprint, photo_fingerprint, short, similarity_name

FORMAT = "polyvse-index"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
LOCK = ".lock"

EXACT = "exact"
IVF = "ivf"
HNSW = "hnsw"
EXACT_MODEL = "exact-model"
#: an exact index scans up to this many queries at once in numpy (a fresh process need not import faiss)
NUMPY_EXACT_QUERIES = 8
IVFPQ = "ivfpq"
KINDS = (EXACT, IVF, HNSW, EXACT_MODEL, IVFPQ)
APPROXIMATE = (IVF, HNSW, IVFPQ)

RECALL_K = 10
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 64
MAX_EF_SEARCH = 4096
IVF_TRAIN_PER_LIST = 64  # k-means training sample: this many vectors per list (at most all of them)
IVF_RETRAIN_GROWTH = 4  # an IVF index retrains its lists once it holds this many times what it was trained on

#: indexes whose photos live in a database, not in the folder: manifest["backend"]["name"] -> its module
BACKEND_MODULES = {"milvus": "polyvse.index.milvus"}

#: the files of a generation whose sizes and digests the manifest records
CHECKED_FILES = ("vectors", "photos", "ann", "penalties")
DIGESTS, MTIMES = "sha256", "mtime_ns"
#: a file something wrote since the manifest recorded it is checked against its digest on open up to this size
CHECK_AT_OPEN_BYTES = 64 << 20

_GEN_FILE = re.compile(r"^(vectors|photos|ann|penalties)\.(\d+)\.(npy|f32|jsonl|faiss)$")


class IndexFormatError(DataError):
    """A folder that is not a (complete, readable) polyvse index."""


class IndexMismatchError(CheckpointError):
    """An index queried with a model other than the one that built it."""


@dataclass(frozen=True, slots=True)  # slots: ~40 bytes less a photo, 0.4 GB at 10M photos
class PhotoEntry:
    id: int  # row in the index; stable: appends only add rows
    name: str  # what people see: the path relative to the indexed folder (or the list file)
    path: str  # absolute path of the photo file at indexing time

    def to_dict(self) -> dict:
        return {"id": self.id, "name": self.name, "path": self.path}


def now_iso() -> str:
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat()


def is_index_dir(path: str | os.PathLike) -> bool:
    return (Path(path) / MANIFEST).is_file()


# -- low-level writes -----------------------------------------------------------------------------------
def _write_atomic(path: Path, write: Callable[[str], None], needed: int | None = None) -> int:
    """write(tmp_path) fills a temp file beside ``path``; it is fsynced and renamed. Returns its size. ``needed``:
    its size when known beforehand, for the message when the disk fills."""
    with atomic_path(path, suffix=".tmp", needed=needed) as tmp:
        write(str(tmp))
        size = tmp.stat().st_size
    return size


@contextlib.contextmanager
def index_lock(root: Path) -> Iterator[None]:
    """Exclusive writer lock on an index folder; a second writer gets a clear error, not a corrupt index. A writer
    that fails leaves the committed generation in force and takes the files of the one it did not commit with it;
    a full disk becomes a DiskFullError naming the file."""
    from filelock import FileLock, Timeout

    root.mkdir(parents=True, exist_ok=True)
    lock = FileLock(root / LOCK, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise DataError(
            "another `polyvse index` process is writing this index right now; wait for it to finish", root
        ) from None
    try:
        yield
    except BaseException as exc:
        _remove_uncommitted(root)
        if isinstance(exc, Exception) and not isinstance(exc, DiskFullError) and is_disk_full(exc, root):
            where = getattr(exc, "filename", None) or root
            raise disk_full_error(where, kept="the index's previous generation stays in force") from exc
        raise
    finally:
        lock.release()


def _remove_uncommitted(root: Path) -> None:
    """Files of generations the manifest does not name (a failed writer's), and temporary files (the lock holder's
    own, since only it writes)."""
    try:
        manifest = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
        keep = {v for v in (manifest.get("files") or {}).values() if isinstance(v, str)}
    except (OSError, ValueError, AttributeError):
        keep = set()
    with contextlib.suppress(OSError):
        for f in os.listdir(root):
            if (_GEN_FILE.match(f) and f not in keep) or (f.startswith(".") and f.endswith(".tmp")):
                (root / f).unlink(missing_ok=True)


# -- the index ------------------------------------------------------------------------------------------
class PhotoIndex:
    """An opened index: photo entries, their embeddings and the search structure.

    Read-only and safe to share between threads; writers (build / append) produce a new generation on
    disk and a new PhotoIndex.
    """

    #: each photo's CSLS penalty per bank key (polyvse.csls.penalties), memory-mapped; None when not stored
    penalties: np.ndarray | None = None

    def __init__(self, root: Path, manifest: dict, photos: list[PhotoEntry], vectors: np.ndarray, ann=None):
        self.root = Path(root)
        self.manifest = manifest
        self.photos = photos
        self.vectors = vectors
        self._ann = ann  # faiss index (IndexFlatIP or IndexHNSWFlat) or None for exact-model (exact: built on use)
        self._by_path = None
        self._device_vectors = None  # torch tensor on a GPU for exact search there (use_device), else None

    @property
    def _ann(self):
        """The FAISS structure searched; an exact index's IndexFlatIP is built from the vectors when first needed
        (a fresh process's few queries are scanned in numpy instead: importing faiss and copying the vectors into
        it cost more than the scan)."""
        if self._ann_index is None and self._flat_pending:
            import faiss

            ann = faiss.IndexFlatIP(self.dim)
            if self.count:
                ann.add(np.ascontiguousarray(self.vectors))
            self._ann_index, self._flat_pending = ann, False
        return self._ann_index

    @_ann.setter
    def _ann(self, value) -> None:
        self._ann_index = value
        self._flat_pending = value is None and self.manifest["search"]["kind"] == EXACT

    def use_device(self, device) -> PhotoIndex:
        """Exact search on ``device`` (a torch.device, or None for the CPU): on a GPU the vectors are copied
        there once and scanned with torch. IVF / HNSW stay in FAISS on the CPU (faiss-cpu is the dependency)."""
        self._device_vectors = None
        if device is not None and device.type == "cuda" and self.kind == EXACT and self.count:
            import torch

            self._device_vectors = torch.from_numpy(np.ascontiguousarray(self.vectors)).to(device)
        return self

    # -- properties -----------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.photos)

    @property
    def count(self) -> int:
        return len(self.photos)

    @property
    def dim(self) -> int:
        return int(self.manifest["dim"])

    @property
    def kind(self) -> str:
        return self.manifest["search"]["kind"]

    @property
    def fingerprint(self) -> str:
        return self.manifest["model"]["fingerprint"]

    @property
    def photo_fingerprint(self) -> str | None:
        """The photo side's fingerprint (None for an index built before it was recorded)."""
        return self.manifest["model"].get("photo_fingerprint")

    @property
    def similarity(self) -> str:
        return self.manifest["model"]["similarity"]

    @property
    def checkpoint_path(self) -> str | None:
        return self.manifest["model"].get("checkpoint")

    def search_params(self, k: int):
        """FAISS search parameters of an approximate index (the tuned nprobe / efSearch), else None."""
        import faiss

        s = self.manifest["search"]
        if self.kind == IVF:
            return faiss.SearchParametersIVF(nprobe=int(s["ivf"]["nprobe"]))
        if self.kind == HNSW:
            return faiss.SearchParametersHNSW(efSearch=max(int(s["hnsw"]["ef_search"]), k))
        return None

    def describe(self) -> str:
        s = self.manifest["search"]
        text = f"{self.count} photos, {self.dim}-d, {s['kind']} search"
        recall = (
            f"recall@{s.get('recall_k')} {s.get('measured_recall') or 0:.3f} measured, target {s.get('recall_target')}"
        )
        if s["kind"] == IVF:
            text += f" ({s['ivf']['nlist']} lists, nprobe {s['ivf']['nprobe']}, {recall})"
        elif s["kind"] == HNSW:
            text += f" (efSearch {s['hnsw']['ef_search']}, {recall})"
        elif s["kind"] == IVFPQ:
            c = s["ivfpq"]
            text += (
                f" ({c['nlist']} lists of {c['code_bytes']}-byte codes, nprobe {c['nprobe']}, {c['depth']} "
                f"candidates re-ranked per 10 from the vectors on disk, {recall})"
            )
        elif s["kind"] == EXACT:
            text += f" (exact below {s['exact_threshold']} photos)"
        else:
            text += f" (model similarity: {self.similarity})"
        return text

    # -- photos ---------------------------------------------------------------------------------------
    def photo(self, photo_id: int) -> PhotoEntry:
        """The entry of an id in the index; DataError for anything else (ids are never paths)."""
        if isinstance(photo_id, bool) or not isinstance(photo_id, (int, np.integer)):
            raise DataError(f"photo id must be an integer, not {photo_id!r}")
        if not 0 <= int(photo_id) < len(self.photos):
            raise DataError(f"no photo with id {photo_id} in this index (ids are 0..{len(self.photos) - 1})")
        return self.photos[int(photo_id)]

    def ids_of_paths(self) -> dict[str, int]:
        if self._by_path is None:
            self._by_path = {p.path: p.id for p in self.photos}
        return self._by_path

    def vector(self, photo_id: int) -> np.ndarray:
        entry = self.photo(photo_id)
        return np.array(self.vectors[entry.id], dtype=np.float32)

    def vectors_of(self, photo_ids) -> np.ndarray:
        """The stored vectors of ``photo_ids``, one row each in that order: one read of the map, not one per photo
        (a CSLS search re-ranks 110 candidates a query)."""
        ids = np.asarray(photo_ids, dtype=np.int64).reshape(-1)
        for i in ids[(ids < 0) | (ids >= len(self.photos))][:1]:
            self.photo(int(i))  # says which id is out of range
        return np.array(self.vectors[ids], dtype=np.float32).reshape(len(ids), self.dim)

    # -- model check ----------------------------------------------------------------------------------
    def check_model(self, model) -> str:
        """Refuse a model whose photos land elsewhere than this index's (its vectors would be meaningless); a model
        that only differs on the text side (languages added by `polyvse adapt`) is accepted. ``index_accepts``."""
        return check_index_accepts(self, model)

    # -- search ---------------------------------------------------------------------------------------
    def search(
        self,
        queries: np.ndarray,
        k: int,
        scorer: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
        tuned_for: int | None = None,
        prior: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top-k photos for each query row: (scores (m, k'), ids (m, k')), k' = min(k, count), best first.

        ``queries`` must be prepared like the stored vectors (L2-normalised for cosine indexes).
        ``scorer(photo_vectors, queries) -> (n, m)`` is the model's similarity; exact-model indexes need it.
        ``tuned_for``: how many of the k the caller keeps after re-ranking them itself (CSLS: 10 of 110); the
        compressed index then re-ranks as many full vectors as its tuning gives for that many (``rerank_search``).
        ``prior``: one value per photo that the caller subtracts from the scores when it re-ranks (CSLS: half the
        r_C); the compressed index then also reads the photos that rank best by their approximate score minus it
        (``rerank_search``). Other kinds return the top k as they would without it.
        """
        q = np.ascontiguousarray(np.atleast_2d(np.asarray(queries, dtype=np.float32)))
        if q.shape[1] != self.dim:
            raise DataError(f"query vectors are {q.shape[1]}-d, the index holds {self.dim}-d vectors")
        k = int(min(max(int(k), 0), self.count))
        m = q.shape[0]
        if k == 0:
            return np.zeros((m, 0), np.float32), np.zeros((m, 0), np.int64)
        if self.kind == EXACT_MODEL:
            if scorer is None:
                raise DataError(
                    f"this index ranks by the model's {self.similarity} similarity; "
                    "search it through a Searcher (polyvse.index.Searcher) with its model"
                )
            return _exact_topk(self.vectors, q, k, scorer)
        if self._device_vectors is not None:
            return torch_exact_topk(self._device_vectors, q, k)
        if self.kind == EXACT and m <= NUMPY_EXACT_QUERIES:
            return _exact_topk(self.vectors, q, k, _inner_product)
        if self.kind == IVFPQ:
            c = self.manifest["search"]["ivfpq"]
            return _drop_missing(
                *rerank_search(
                    self._ann, self.vectors, q, k, int(c["nprobe"]), int(c["depth"]), tuned_for=tuned_for, prior=prior
                )
            )
        params = self.search_params(k)
        if params is not None:
            scores, ids = self._ann.search(q, k, params=params)
        else:
            scores, ids = self._ann.search(q, k)
        return _drop_missing(scores, ids)

    # -- open -----------------------------------------------------------------------------------------
    @classmethod
    def open(cls, root: str | os.PathLike, *, retries: int = 3) -> PhotoIndex:
        root = Path(root)
        for attempt in range(retries):
            try:
                return cls._open_once(root)
            except FileNotFoundError as exc:
                # an append switched generations between our manifest read and file reads: read again
                if attempt == retries - 1:
                    raise IndexFormatError(
                        f"{Path(exc.filename or '?').name}, named by the manifest, is missing. If another "
                        "process is writing the index, try again; otherwise the index is damaged: rebuild it",
                        root,
                    ) from None
                time.sleep(0.05)
        raise AssertionError("unreachable")

    @classmethod
    def _open_once(cls, root: Path) -> PhotoIndex:
        if not root.is_dir():
            raise IndexFormatError(
                "no index folder here; build one with `polyvse index build` (`make model` builds "
                "the default one, runs/model/index)",
                root,
            )
        manifest = read_manifest(root)
        backend = manifest.get("backend")
        if isinstance(backend, dict) and backend.get("name", "faiss") != "faiss":
            return _open_backend(root, manifest, str(backend.get("name")))
        files = manifest["files"]
        n, dim = int(manifest["count"]), int(manifest["dim"])
        vectors = _open_vectors(root, files, n, dim)
        if vectors.dtype != np.float32 or vectors.shape != (n, dim):
            raise IndexFormatError(
                f"{files['vectors']} holds {vectors.shape} {vectors.dtype}, the manifest "
                f"says ({n}, {dim}) float32; the index is damaged, rebuild it",
                root,
            )
        _check_contents(root, files, "vectors")
        _check_size(root / files["photos"], files.get("photos_bytes"))
        # the photo list is read whole anyway: its digest too, up to the size a fresh process may hash
        _check_contents(root, files, "photos", full=int(files.get("photos_bytes") or 0) <= CHECK_AT_OPEN_BYTES)
        photos = read_photos(root / files["photos"], n)
        kind = manifest["search"]["kind"]
        if kind == EXACT:
            ann = None  # its IndexFlatIP is built when first needed (PhotoIndex._ann)
        elif kind in APPROXIMATE:
            import faiss

            if not files.get("ann"):
                raise IndexFormatError(f"the manifest names no {kind} file; the index is damaged, rebuild it", root)
            path = root / files["ann"]
            if not path.is_file():
                raise FileNotFoundError(errno.ENOENT, "missing", str(path))
            _check_size(path, files.get("ann_bytes"))
            _check_contents(root, files, "ann")
            try:
                ann = faiss.read_index(str(path))
            except Exception as exc:  # noqa: BLE001 - faiss raises RuntimeError for damaged files
                raise IndexFormatError(f"unreadable {kind} file {files['ann']} ({exc})", root) from None
            if ann.ntotal != n or ann.d != dim:
                raise IndexFormatError(
                    f"{files['ann']} holds {ann.ntotal} vectors of {ann.d}-d, the manifest "
                    f"says {n} of {dim}-d; the index is damaged, rebuild it",
                    root,
                )
        elif kind == EXACT_MODEL:
            ann = None
        else:
            raise IndexFormatError(f"unknown search kind {kind!r} in the manifest (known: {', '.join(KINDS)})", root)
        index = cls(root, manifest, photos, vectors, ann)
        if files.get("penalties") and (root / files["penalties"]).is_file():
            _check_size(root / files["penalties"], files.get("penalties_bytes"))
            _check_contents(root, files, "penalties")
        index.penalties = open_penalties(root, manifest, n)
        return index


def _open_backend(root: Path, manifest: dict, name: str) -> PhotoIndex:
    """An index whose photos live elsewhere (the manifest's backend): its module's ``open_index(root, manifest)``,
    named in BACKEND_MODULES (imported by name: the backend modules build on this one)."""
    if name not in BACKEND_MODULES:
        raise IndexFormatError(
            f"the manifest names the {name!r} backend, which this polyvse ({__version__}) does not "
            f"know (known: faiss, {', '.join(BACKEND_MODULES)})",
            root,
        )
    import importlib

    return importlib.import_module(BACKEND_MODULES[name]).open_index(root, manifest)


def _open_vectors(root: Path, files: dict, n: int, dim: int) -> np.ndarray:
    """The vectors named by the manifest, memory-mapped: a .npy file, or raw rows (.f32) that a later generation
    may have extended in place (only the first n rows are this generation's)."""
    path = root / files["vectors"]
    raw = path.suffix == ".f32"
    _check_size(path, files.get("vectors_bytes"), at_least=raw)
    try:
        return open_rows(path, n, dim) if raw else np.load(path, mmap_mode="r", allow_pickle=False)
    except FileNotFoundError:
        raise
    except Exception as exc:  # noqa: BLE001 - numpy raises several types for damaged files
        raise IndexFormatError(f"unreadable vectors file {files['vectors']} ({exc})", root) from None


def _check_size(path: Path, expected, at_least: bool = False) -> None:
    if expected is None:
        return
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise
    if size < int(expected) or (size != int(expected) and not at_least):
        raise IndexFormatError(
            f"{path.name} is {size} bytes, the manifest says {expected}; the index is "
            "damaged (copied while being written?), rebuild it",
            path.parent,
        )


def _sha256(path: Path, start: int, end: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        fh.seek(start)
        left = end - start
        while left > 0 and (block := fh.read(min(left, 1 << 22))):
            digest.update(block)
            left -= len(block)
    return digest.hexdigest()


def _check_contents(root: Path, files: dict, key: str, full: bool = False) -> None:
    """IndexFormatError naming the file when its bytes are not those the manifest recorded a digest of. Unless
    ``full``, only a file written since it was recorded (another modification time) and at most
    CHECK_AT_OPEN_BYTES long is read: opening must not read a large memory-mapped file whole."""
    segments = (files.get(DIGESTS) or {}).get(key)
    if not segments:
        return  # a manifest from before digests were recorded: its sizes are checked
    path = root / files[key]
    if not full and (
        path.stat().st_mtime_ns == (files.get(MTIMES) or {}).get(key) or int(segments[-1][0]) > CHECK_AT_OPEN_BYTES
    ):
        return
    start = 0
    for end, digest in segments:
        if _sha256(path, start, int(end)) != digest:
            raise IndexFormatError(
                f"{path.name}: bytes {start}..{end} do not match the SHA-256 the manifest recorded; the file is "
                "damaged: rebuild the index (`polyvse index build`) or restore it from a copy",
                root,
            )
        start = int(end)


def _record_digests(root: Path, files: dict, old_files: dict | None) -> None:
    """Fill ``files`` with each file's digest segments and modification time (before the commit point). The raw
    vectors file an append extended in place (the same file as the old generation's) keeps the old segments and
    hashes only its new rows."""
    digests, mtimes = {}, {}
    for key in CHECKED_FILES:
        if not files.get(key):
            continue
        path = root / files[key]
        end = int(files.get(f"{key}_bytes") or path.stat().st_size)
        segments = []
        old = (old_files or {}).get(key)
        old_segments = ((old_files or {}).get(DIGESTS) or {}).get(key)
        if (
            key == "vectors"
            and path.suffix == ".f32"
            and old
            and old_segments
            and (root / old).is_file()
            and os.path.samefile(root / old, path)
            and int(old_segments[-1][0]) <= end
        ):
            segments = [[int(e), d] for e, d in old_segments]
        start = segments[-1][0] if segments else 0
        if end > start or not segments:
            segments.append([end, _sha256(path, start, end)])
        digests[key], mtimes[key] = segments, path.stat().st_mtime_ns
    files[DIGESTS], files[MTIMES] = digests, mtimes


def verify_index(root: str | os.PathLike) -> dict:
    """Open the index (sizes, structure) and check every file against the digests its manifest recorded, reading each
    whole: IndexFormatError naming the first damaged file. Returns {"files": {name: bytes}, "digests": whether the
    manifest records them (an index written before they were: sizes and structure checked only)}."""
    root = Path(root)
    index = PhotoIndex.open(root)
    files = index.manifest.get("files") or {}
    checked = {}
    for key in CHECKED_FILES:
        if files.get(key):
            _check_contents(root, files, key, full=True)
            checked[files[key]] = (root / files[key]).stat().st_size
    return {"index": index, "files": checked, "digests": bool(files.get(DIGESTS))}


def _drop_missing(scores: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """FAISS pads with id -1 when it finds fewer than k; keep the columns every row filled."""
    ids = ids.astype(np.int64, copy=False)
    if (ids >= 0).all():
        return scores.astype(np.float32, copy=False), ids
    keep = int((ids >= 0).sum(axis=1).min())
    return scores[:, :keep].astype(np.float32, copy=False), ids[:, :keep]


def torch_exact_topk(vectors, queries: np.ndarray, k: int, chunk: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Exact inner-product top-k of ``queries`` (m, d) over a torch tensor ``vectors`` (n, d) on any device:
    (scores (m, k), ids (m, k)), best first, as FAISS's IndexFlatIP returns them (ties in any order).

    Chunked over the rows so that a chunk's score matrix stays near 1 GiB (2^28 floats) however many queries.
    """
    import torch

    m = queries.shape[0]
    chunk = chunk or max(1 << 16, (1 << 28) // max(1, m))
    q = torch.from_numpy(np.ascontiguousarray(queries, dtype=np.float32)).to(vectors.device)
    best_s = best_i = None
    for start in range(0, vectors.shape[0], chunk):
        scores = q @ vectors[start : start + chunk].T  # (m, c)
        top_s, top_i = torch.topk(scores, min(k, scores.shape[1]), dim=1)
        top_i = top_i + start
        if best_s is not None:  # merge with the best of the chunks before
            cat_s, cat_i = torch.cat([best_s, top_s], dim=1), torch.cat([best_i, top_i], dim=1)
            top_s, order = torch.topk(cat_s, min(k, cat_s.shape[1]), dim=1)
            top_i = torch.gather(cat_i, 1, order)
        best_s, best_i = top_s, top_i
    return best_s.float().cpu().numpy(), best_i.cpu().numpy().astype(np.int64)


def _inner_product(vectors: np.ndarray, q: np.ndarray) -> np.ndarray:
    return vectors @ q.T


def _exact_topk(vectors: np.ndarray, q: np.ndarray, k: int, scorer, chunk: int = 16384):
    """Top-k rows of ``vectors`` under ``scorer(vectors_chunk, q) -> (c, m)``, chunked over the photos.

    Deterministic: ties are broken by the lower photo id.
    """
    m = q.shape[0]
    best_s = np.zeros((m, 0), dtype=np.float32)
    best_i = np.zeros((m, 0), dtype=np.int64)
    for start in range(0, len(vectors), chunk):
        block = np.array(vectors[start : start + chunk], dtype=np.float32)  # a writable copy of the rows
        s = np.asarray(scorer(block, q), dtype=np.float32).T  # (m, c)
        cat_s = np.concatenate([best_s, s], axis=1)
        cat_i = np.concatenate([best_i, np.broadcast_to(np.arange(start, start + len(block)), s.shape)], axis=1)
        order = np.stack([np.lexsort((cat_i[r], -cat_s[r]))[:k] for r in range(m)])  # score desc, then id
        best_s = np.take_along_axis(cat_s, order, axis=1)
        best_i = np.take_along_axis(cat_i, order, axis=1)
    return best_s, best_i


# -- manifest + photo list ------------------------------------------------------------------------------
def read_manifest(root: Path) -> dict:
    path = root / MANIFEST
    if not path.is_file():
        hint = " (it looks like a checkpoint: pass it as --checkpoint)" if (root / "config.json").is_file() else ""
        raise IndexFormatError(f"no {MANIFEST}: not a polyvse index{hint}; build one with `polyvse index build`", root)
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise IndexFormatError(f"unreadable {MANIFEST} ({exc})", root) from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise IndexFormatError(f"{MANIFEST} is not a polyvse index manifest", root)
    if manifest.get("format_version") != FORMAT_VERSION:
        raise IndexFormatError(
            f"index format version {manifest.get('format_version')!r}; this polyvse ({__version__}) reads "
            f"version {FORMAT_VERSION}: rebuild the index with `polyvse index build`",
            root,
        )
    for key in ("files", "count", "dim", "model", "search"):
        if key not in manifest:
            raise IndexFormatError(f"{MANIFEST} lacks {key!r}; the index is damaged, rebuild it", root)
    _check_manifest_fields(root, manifest)
    return manifest


def _check_manifest_fields(root: Path, manifest: dict) -> None:
    """The fields an open reads, of the types it reads them as: a damaged manifest is refused by name."""

    def bad(field: str, want: str):
        return IndexFormatError(f"{MANIFEST}: {field} is not {want}; the index is damaged, rebuild it", root)

    for key in ("count", "dim"):
        if not isinstance(manifest[key], int) or isinstance(manifest[key], bool) or manifest[key] < 0:
            raise bad(key, "a count")
    for key in ("files", "model", "search"):
        if not isinstance(manifest[key], dict):
            raise bad(key, "an object")
    backend = manifest.get("backend")
    if isinstance(backend, dict) and backend.get("name", "faiss") != "faiss":
        return  # its photos live in a database: the backend checks its own section
    if not isinstance(manifest["search"].get("kind"), str):
        raise bad("search.kind", "a name")
    for key in ("vectors", "photos"):
        name = manifest["files"].get(key)
        if not isinstance(name, str) or not _GEN_FILE.match(name):
            raise bad(f"files.{key}", "a file of this index")


def read_photos(path: Path, n: int) -> list[PhotoEntry]:
    with open(path, encoding="utf-8") as fh:  # FileNotFoundError propagates (generation switch)
        lines = fh.read().splitlines()
    # one JSON parse of every line (a query's fresh process opens the index: a json.loads call per photo is a visible share of its start-up);
    # anything unexpected is read again line by line, which names the bad line
    try:
        rows = json.loads("[" + ",".join(line for line in lines if line.strip()) + "]")
        photos = [PhotoEntry(int(d["id"]), str(d["name"]), str(d["path"])) for d in rows]
        if len(photos) == n and all(entry.id == i for i, entry in enumerate(photos)):
            return photos
    except (json.JSONDecodeError, KeyError, TypeError, ValueError):
        pass
    return _read_photo_lines(path, lines, n)


def _read_photo_lines(path: Path, lines: list[str], n: int) -> list[PhotoEntry]:
    photos = []
    for line_no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            entry = PhotoEntry(int(d["id"]), str(d["name"]), str(d["path"]))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise IndexFormatError(f"bad photo line ({exc}); the index is damaged, rebuild it", path, line_no) from None
        if entry.id != len(photos):
            raise IndexFormatError(f"photo id {entry.id} out of order (expected {len(photos)})", path, line_no)
        photos.append(entry)
    if len(photos) != n:
        raise IndexFormatError(f"{len(photos)} photo lines, the manifest says {n}; the index is damaged", path)
    return photos


#: how ``check_index_accepts`` accepted a model: its photo side is the index's; or, for an index whose manifest
#: predates recorded photo sides, its legacy fingerprint is the manifest's
SAME_PHOTO_SIDE, SAME_LEGACY = "same photo side", "same legacy fingerprint"


def check_index_accepts(index_or_manifest, model) -> str:
    """Whether an index (a PhotoIndex, its folder or its manifest dict) serves queries embedded by ``model``: how
    it accepts (``SAME_PHOTO_SIDE``, whatever the text side, e.g. languages added; ``SAME_LEGACY``: a manifest written
    before indexes recorded the photo side, whose fingerprint is the model's legacy one), else IndexMismatchError
    saying what differs and what to do.

    A manifest that records ``photo_fingerprint`` is checked on it alone, so a fresh process hashes only the photo
    side's weights (none once their digests are cached)."""
    if isinstance(index_or_manifest, dict):
        manifest, root = index_or_manifest, None
    elif isinstance(index_or_manifest, (str, os.PathLike)):
        root = Path(index_or_manifest)
        try:
            manifest = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise IndexFormatError(f"unreadable {MANIFEST} ({exc}); is this a polyvse index?", root) from None
    else:
        manifest, root = index_or_manifest.manifest, index_or_manifest.root
    m = manifest.get("model") or {}
    where = f"{root}: " if root is not None else ""
    built = f"model {short(m.get('fingerprint'))} (checkpoint {m.get('checkpoint') or 'unknown'})"
    recorded = m.get("photo_fingerprint")
    if recorded:
        photo = photo_fingerprint(model)
        if photo == recorded:
            return SAME_PHOTO_SIDE
        raise IndexMismatchError(
            f"{where}this index was built with {built}, whose photos land elsewhere than those of the model given "
            f"(photo side {short(recorded)} in the index, {short(photo)} in the model); its embeddings live in a "
            "different space. Query with the checkpoint that built the index (or one that only adds languages to "
            "it), or rebuild the index with `polyvse index build --checkpoint ...`"
        )
    legacy = legacy_fingerprint(model)
    if m.get("fingerprint") == legacy:
        return SAME_LEGACY
    raise IndexMismatchError(
        f"{where}this index was built with {built}, but the model given is {short(legacy)}; its embeddings live in "
        "a different space (the index predates recorded photo sides, so only the model that built it, or that model "
        "with languages added, can query it). Query with the checkpoint that built the index, or rebuild the index "
        "with `polyvse index build --checkpoint ...`"
    )


def index_accepts(index_or_manifest, model) -> bool:
    """``check_index_accepts`` as a yes or no."""
    try:
        check_index_accepts(index_or_manifest, model)
    except IndexMismatchError:
        return False
    return True


def model_section(model, checkpoint_path: str | os.PathLike | None) -> dict:
    ck = model.checkpoint
    return {
        "fingerprint": model_fingerprint(model),
        "photo_fingerprint": photo_fingerprint(model),
        "checkpoint": str(Path(checkpoint_path).resolve()) if checkpoint_path else None,
        "similarity": similarity_name(model),
        "embed_dim": int(model.embed_dim),
        "languages": list(model.languages),
        "backbone": ck.backbone,
        "feature_key": ck.feature_key,
        "ten_crop": bool(ck.ten_crop),
        "squash_photos": bool(ck.squash_photos),
    }


def next_generation(root: Path) -> int:
    """The number of the next generation: above the manifest's and above any file left by a killed writer."""
    old_gen = 0
    if (root / MANIFEST).is_file():
        try:
            old_gen = int(json.loads((root / MANIFEST).read_text(encoding="utf-8")).get("generation", 0))
        except (OSError, ValueError, json.JSONDecodeError):
            old_gen = 0
    existing = [int(m.group(2)) for f in os.listdir(root) if (m := _GEN_FILE.match(f))] if root.is_dir() else []
    return max([old_gen, *existing]) + 1


def write_generation(
    root: Path,
    manifest: dict,
    photos: Iterable[PhotoEntry],
    vectors: np.ndarray | VectorsFile,
    ann=None,
    *,
    generation: int | None = None,
    csls=None,
) -> dict:
    """Write a complete new generation and switch the manifest to it (the commit point). Returns the manifest.

    The caller holds :func:`index_lock`. ``manifest`` carries everything but ``files``/``generation``/
    ``count``/``dim``, which are filled in here. ``vectors``: an array (written here as ``vectors.<g>.npy``) or the
    generation's raw vectors file, already written (``generation`` is then the number it was named for).
    ``csls``: a CSLS checkpoint's ``polyvse.csls.penalties.PenaltyWriter``, which stores each photo's r_C.
    """
    root.mkdir(parents=True, exist_ok=True)
    old_files = _recorded_files(root)
    gen = generation or next_generation(root)
    files = {"vectors": f"vectors.{gen}.npy", "photos": f"photos.{gen}.jsonl", "ann": None}
    if isinstance(vectors, VectorsFile):
        files["vectors"], files["vectors_bytes"], dim = vectors.path.name, vectors.finish(), vectors.dim
    else:
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        dim = int(vectors.shape[1])
        files["vectors_bytes"] = _write_vectors(root / files["vectors"], vectors)
    files["photos_bytes"], count = _write_photos(root / files["photos"], photos)
    rows = vectors.count if isinstance(vectors, VectorsFile) else len(vectors)
    if count != rows:  # before the commit point: the previous generation stays in force
        raise DataError(f"{count} photo entries for {rows} vectors; nothing was written", root)
    if ann is not None and manifest["search"]["kind"] in APPROXIMATE:
        import faiss

        files["ann"] = f"ann.{gen}.faiss"
        files["ann_bytes"] = _write_atomic(root / files["ann"], lambda tmp: faiss.write_index(ann, tmp))
    manifest = {k: v for k, v in manifest.items() if k != "csls"}  # only a table written now is this generation's
    if csls is not None:
        table_files, manifest["csls"] = csls(root, gen, vectors.rows() if isinstance(vectors, VectorsFile) else vectors)
        files.update(table_files)
    _record_digests(root, files, old_files if isinstance(old_files, dict) else None)
    manifest = {
        **manifest,
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "polyvse_version": __version__,
        "generation": gen,
        "count": count,
        "dim": dim,
        "files": files,
        "updated": now_iso(),
    }
    manifest.setdefault("created", manifest["updated"])
    fsync_dir(root)
    from ..model.checkpoint import write_json_atomic

    write_json_atomic(root / MANIFEST, manifest)
    fsync_dir(root)
    _remove_other_generations(root, gen)
    return manifest


def _recorded_files(root: Path):
    """The ``files`` section of the manifest in force (None where there is none or it is unreadable)."""
    try:
        return json.loads((root / MANIFEST).read_text(encoding="utf-8")).get("files")
    except (OSError, ValueError, AttributeError):
        return None


def _write_vectors(path: Path, vectors: np.ndarray) -> int:
    """Write ``vectors`` (contiguous float32) as ``path`` atomically; returns its size in bytes."""

    def save_vectors(tmp: str) -> None:
        with open(tmp, "wb") as fh:
            np.save(fh, vectors, allow_pickle=False)

    header = 128  # np.save's header of a 2-d float32 array
    return _write_atomic(path, save_vectors, needed=vectors.nbytes + header)


def _write_photos(path: Path, photos: Iterable[PhotoEntry]) -> tuple[int, int]:
    """Write the photo entries as JSON lines to ``path`` atomically; returns (its size in bytes, entries)."""
    count = [0]

    def save_photos(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as fh:
            for p in photos:
                fh.write(json.dumps(p.to_dict(), ensure_ascii=False) + "\n")
                count[0] += 1

    size = _write_atomic(path, save_photos)
    return size, count[0]


def _remove_other_generations(root: Path, gen: int) -> None:
    """Remove older generations' files (and leftovers of killed writers) once ``gen`` is in force."""
    for f in os.listdir(root):
        m = _GEN_FILE.match(f)
        if m and int(m.group(2)) != gen:
            (root / f).unlink(missing_ok=True)
        elif f.startswith(".") and f.endswith(".tmp"):
            (root / f).unlink(missing_ok=True)
