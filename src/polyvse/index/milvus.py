"""Photo indexes kept in Milvus: past one machine, a collection in a Milvus server or cluster (or, on one machine,
an embedded milvus-lite file), searched through the same ``PhotoIndex`` interface as the FAISS folders.

    polyvse index build --checkpoint C --images DIR --out INDEX --backend milvus --uri http://host:19530
    polyvse index build ... --backend milvus --uri photos.db        (embedded milvus-lite: a local file)

The index folder keeps only ``manifest.json`` (format, model fingerprint, search structure, and ``backend``: the
URI, database and collection); the collection holds one entity a photo: ``id`` (its row, the primary key),
``vector`` (the stored embedding, L2-normalised), ``name`` and ``path``. ``index add``, ``search`` and ``serve``
open it from the folder alone (``PhotoIndex.open`` hands a manifest with a Milvus backend to
:class:`MilvusPhotoIndex`). A token for a server that needs one is read from ``$POLYVSE_MILVUS_TOKEN``
(``user:password`` or an API key) and never written to the manifest.

The search structure is chosen as for FAISS (``ann.choose_kind``): FLAT (exact, inner product) below the exact
threshold, IVF_FLAT above it with ``nprobe`` tuned by ``ann.tune_nprobe`` to the recall target, against the same
probe queries (the build measures Milvus's own answers). Milvus clusters each segment on its own, so ``nlist`` is
``ann.ivf_lists`` of a segment's rows (of the collection's while it is smaller): milvus-lite's segments hold up to
100,000 rows, a server's about 1 GiB of vectors (its default segment size); FAISS's rule over the whole collection
would cut a 1M-photo collection's 32k-row lite segments into 4,000 lists of 8. HNSW and the
compressed kind are FAISS-only here (milvus-lite 3.x has FLAT, IVF_FLAT, IVF_SQ8, HNSW and HNSW_SQ; a server has
more, DiskANN and IVF_PQ among them). Only cosine models: Milvus ranks by inner product.

A server that stops answering (killed, hung, restarting) fails a call within its timeout (QUERY_TIMEOUT_S for a
search or a lookup, TIMEOUT_S for a whole-collection read and others) with MilvusDownError, which names the URI and
says to start the server and rerun (`polyvse serve` answers it with 503); pymilvus connects again on a later call,
and a collection a restarted server has not loaded is loaded by the first search that finds it so.

Searches ask for ids below the manifest's count (``filter id < count``), so rows an interrupted ``index add``
inserted before its manifest switch are never answered; the next add deletes them first. A search returns each
hit's name, path and vector with it: the photo entries and vectors the searcher reads next (the hit list, CSLS
re-ranking's candidate vectors) come from that answer, kept in a bounded cache, not from one request each.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import DataError, PolyvseError
from .ann import choose_kind, ivf_lists, search_section, tune_nprobe
from .store import (
    _GEN_FILE,
    EXACT,
    FORMAT,
    FORMAT_VERSION,
    IVF,
    IVF_RETRAIN_GROWTH,
    MANIFEST,
    IndexFormatError,
    PhotoEntry,
    PhotoIndex,
    _drop_missing,
    fsync_dir,
    now_iso,
)

MILVUS, FAISS = "milvus", "faiss"
BACKENDS = (FAISS, MILVUS)
TOKEN_ENV = "POLYVSE_MILVUS_TOKEN"
TIMEOUT_S = 30.0  # per request, connecting included
# a search or read: what a served request waits at most, a server that stopped answering included
QUERY_TIMEOUT_S = 10.0
# building the vector index (and loading it) clusters every segment within one request: minutes at 1M rows
BUILD_TIMEOUT_S = 3600.0
# milvus-lite's gRPC server keeps gRPC's default ping policy: pings under 5 minutes apart on a request that sends no
# data are strikes, and after two it hangs up (GOAWAY too_many_pings), which pymilvus answers by sending the
# request again ("index already exists" for a long index build); pymilvus pings every 10 s, so ask for 10 minutes
LITE_GRPC_OPTIONS = {"grpc.keepalive_time_ms": 600_000}
INSERT_ROWS = 4096  # entities per insert request (a 1024-d batch: 16 MiB, under gRPC's 64 MiB)
READ_ROWS = 4096  # entities per query when reading the collection back
MAX_NLIST = 65536  # Milvus's bound on IVF's nlist
LITE_SEGMENT_ROWS = 100_000  # milvus-lite 3.x: MAX_SEGMENT_ROWS
SERVER_SEGMENT_BYTES = 1 << 30  # a Milvus server's default segment size (dataCoord.segment.maxSize, 1024 MB)
TEXT_MAX = 65535  # VARCHAR bound: names and paths
FIELDS = ["name", "path", "vector"]
CACHE_BYTES = 64 << 20  # photo entries + vectors kept from recent answers


class MilvusError(PolyvseError):
    """Milvus could not be used: names the URI (and collection) and what to do."""

    http_status = 503  # `polyvse serve`: the service's database is unavailable, not the request at fault


class MilvusUnreachableError(MilvusError):
    """No Milvus answers at the URI (or a milvus-lite file that cannot be opened)."""


class MilvusDownError(MilvusUnreachableError):
    """The server stopped answering a request (refused, gone, or no answer in time): says to start it and ``then``
    (what to do once it is back)."""

    def __init__(self, target: MilvusTarget, what: str, detail: str, then: str = "try again"):
        self.target, self.what, self.detail = target, what, detail
        db = f" (database {target.db_name})" if target.db_name else ""
        super().__init__(
            f"the Milvus server at {target.uri} does not answer (while trying to {what} in collection "
            f"{target.collection!r}{db}: {detail}); start it, or wait until it is back, and {then}"
        )


class MilvusNotLoadedError(MilvusError):
    """The collection is not in the server's memory: a server restarted since it was loaded does not reload it."""


class MilvusCollectionError(MilvusError, IndexFormatError):
    """The collection an index names is not there (or not as the manifest describes it), or is in the way."""

    def __init__(self, message: str, path=None):
        IndexFormatError.__init__(self, message, path)


@dataclass(frozen=True)
class MilvusTarget:
    """Where an index lives in Milvus. ``uri``: http(s)://host:port of a server or cluster, or the absolute path of
    a milvus-lite ``.db`` file."""

    uri: str
    collection: str
    db_name: str = ""

    @property
    def is_lite(self) -> bool:
        return "://" not in self.uri

    def where(self) -> str:
        db = f", database {self.db_name}" if self.db_name else ""
        return f"collection {self.collection!r} at {self.uri}{db}"

    def to_manifest(self) -> dict:
        return {"name": MILVUS, "uri": self.uri, "collection": self.collection, "db_name": self.db_name}

    @classmethod
    def from_manifest(cls, section: dict, root) -> MilvusTarget:
        try:
            return cls(str(section["uri"]), str(section["collection"]), str(section.get("db_name") or ""))
        except (KeyError, TypeError):
            raise IndexFormatError(
                f"{MANIFEST}'s backend section lacks the Milvus uri or collection; the index is damaged, rebuild it",
                root,
            ) from None


def backend_of(manifest: dict) -> str:
    """ "milvus" or "faiss" (manifests without a backend section are FAISS folders)."""
    section = manifest.get("backend")
    return str(section.get("name", FAISS)) if isinstance(section, dict) else FAISS


def target_for(
    backend: str, uri: str | None, collection: str | None, root, db_name: str | None = None
) -> MilvusTarget | None:
    """The build request's Milvus target (None for FAISS), checked before any work."""
    if backend not in BACKENDS:
        raise DataError(f"backend {backend!r}: choose one of {', '.join(BACKENDS)}")
    if backend == FAISS:
        if uri or collection:
            raise DataError("--uri and --collection are for --backend milvus")
        return None
    if not uri:
        raise DataError(
            "--backend milvus needs --uri: http://host:19530 for a Milvus server or cluster, or a "
            "file ending in .db for embedded milvus-lite"
        )
    _check_installed(str(uri).strip())
    uri = str(uri).strip()
    if "://" not in uri:
        if not uri.endswith(".db"):
            raise DataError(f"--uri {uri}: a milvus-lite file's name must end in .db (or give http://host:19530)")
        uri = str(Path(uri).expanduser().resolve())
    name = collection or "polyvse_" + re.sub(r"[^0-9A-Za-z_]", "_", Path(root).resolve().name)
    if not re.fullmatch(r"[A-Za-z_][0-9A-Za-z_]{0,254}", name):
        raise DataError(
            f"collection name {name!r}: letters, digits and underscores, starting with a letter or "
            "underscore, at most 255 characters"
        )
    return MilvusTarget(uri, name, db_name or "")


def _check_installed(uri: str) -> None:
    """The Milvus client (and milvus-lite for a .db file) come with the milvus extra, not the base install."""
    import importlib.util

    needed = ["pymilvus"] + ([] if "://" in uri else ["milvus_lite"])
    missing = [name for name in needed if importlib.util.find_spec(name) is None]
    if missing:
        raise DataError(
            f"--backend milvus needs {' and '.join(missing)}, which this install lacks: pip install 'polyvse[milvus]'"
        )


# -- connecting -------------------------------------------------------------------------------------------
_CLIENTS: dict[tuple, object] = {}
_CLIENTS_LOCK = threading.Lock()


def _message(exc: Exception) -> str:
    return str(getattr(exc, "message", None) or exc).strip() or type(exc).__name__


@contextlib.contextmanager
def _quiet_lite() -> Iterator[None]:
    """milvus-lite logs a traceback when it cannot open its file; the error raised below says it in one line."""
    log = logging.getLogger("milvus_lite.server_manager")
    was, log.disabled = log.disabled, True
    try:
        yield
    finally:
        log.disabled = was


def connect(target: MilvusTarget, *, create: bool = False):
    """A MilvusClient for ``target`` (one per URI and database in a process: milvus-lite serves a file to one
    process, so its clients share it). MilvusUnreachableError when nothing answers."""
    key = (target.uri, target.db_name)
    with _CLIENTS_LOCK:
        if key in _CLIENTS:
            return _CLIENTS[key]
        _check_installed(target.uri)
        from pymilvus import MilvusClient

        if target.is_lite:
            if not create and not Path(target.uri).exists():
                raise MilvusUnreachableError(
                    f"the milvus-lite file {target.uri} is not there (moved or deleted?); "
                    "rebuild the index with `polyvse index build --backend milvus --uri "
                    "FILE.db --force`"
                )
            Path(target.uri).parent.mkdir(parents=True, exist_ok=True)
        try:
            with _quiet_lite():
                client = MilvusClient(
                    uri=target.uri,
                    token=os.environ.get(TOKEN_ENV, ""),
                    db_name=target.db_name,
                    timeout=TIMEOUT_S,
                    **({"grpc_options": LITE_GRPC_OPTIONS} if target.is_lite else {}),
                )
        except Exception as exc:  # noqa: BLE001 - pymilvus raises MilvusException and its config errors
            if target.is_lite:
                raise MilvusUnreachableError(
                    f"cannot open the milvus-lite file {target.uri} ({_message(exc)}). milvus-lite serves a file to "
                    "one process at a time: if another one has it open (a `polyvse serve`?), stop it, or serve the "
                    f"file to several with `milvus-lite server --data-dir {target.uri} --port 19530` and give "
                    "--uri http://127.0.0.1:19530"
                ) from None
            raise MilvusUnreachableError(
                f"cannot reach Milvus at {target.uri} ({_message(exc)}); start the server or check the address "
                f"(and ${TOKEN_ENV} if the server needs a token, --milvus-db if the database is not the default)"
            ) from None
        _CLIENTS[key] = client
        return client


_DOWN_CODES = ("UNAVAILABLE", "DEADLINE_EXCEEDED")  # gRPC: nothing listens, or no answer within the deadline
_DOWN_WORDS = ("server unavailable", "fail connecting", "deadline exceeded", "retry timeout", "connection refused")
NOT_LOADED = 101  # Milvus's CollectionNotLoaded


def _is_down(exc: BaseException | None) -> bool:
    """Whether ``exc``, or an error it was raised from, says that no server answered: pymilvus wraps gRPC's
    UNAVAILABLE / DEADLINE_EXCEEDED in its own exception after its reconnection attempt fails."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        code = getattr(exc, "code", None)
        with contextlib.suppress(Exception):
            if callable(code) and getattr(code(), "name", "") in _DOWN_CODES:
                return True
        if any(word in _message(exc).lower() for word in _DOWN_WORDS):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _call(target: MilvusTarget, what: str, fn, *args, timeout: float = TIMEOUT_S, **kwargs):
    """A client call, bounded by ``timeout`` seconds (pymilvus waits without end otherwise), whose failure becomes
    a MilvusError naming the collection: MilvusDownError when the server does not answer."""
    try:
        return fn(*args, timeout=timeout, **kwargs)
    except PolyvseError:
        raise
    except Exception as exc:  # noqa: BLE001 - MilvusException and gRPC errors
        if _is_down(exc):
            details = getattr(exc, "details", None)  # a gRPC error's own words; its str() is a multi-line dump
            detail = details() if callable(details) else _message(exc).splitlines()[0]
            raise MilvusDownError(target, what, str(detail or type(exc).__name__)) from None
        if getattr(exc, "code", None) == NOT_LOADED or "not loaded" in _message(exc).lower():
            raise MilvusNotLoadedError(f"{target.where()} is not loaded: {_message(exc)}") from None
        raise MilvusError(f"Milvus failed to {what} ({target.where()}): {_message(exc)}") from None


# -- the collection ---------------------------------------------------------------------------------------
def segment_rows(target: MilvusTarget, dim: int) -> int:
    """The rows of a full segment, which Milvus clusters on its own (see the module's note)."""
    return LITE_SEGMENT_ROWS if target.is_lite else SERVER_SEGMENT_BYTES // (4 * int(dim))


def nlist_for(target: MilvusTarget, n: int, dim: int) -> int:
    """IVF lists of a segment: ``ann.ivf_lists`` of its rows (n while the collection is smaller than one)."""
    return min(ivf_lists(min(int(n), segment_rows(target, dim))), MAX_NLIST)


def _index_params(client, target: MilvusTarget, kind: str, n: int, dim: int) -> tuple[object, dict]:
    """(pymilvus index params, the manifest's record of them) for ``kind`` over n vectors."""
    if kind == EXACT:
        spec = {"index_type": "FLAT", "metric_type": "IP", "params": {}}
    else:
        spec = {
            "index_type": "IVF_FLAT",
            "metric_type": "IP",
            "params": {"nlist": nlist_for(target, n, dim)},
            "segment_rows": segment_rows(target, dim),
        }
    return _params_of(client, spec), spec


def _params_of(client, spec: dict):
    """pymilvus index params for a manifest's record of the vector index (``search.milvus``)."""
    params = client.prepare_index_params()
    build = dict(spec.get("params") or {})
    # pymilvus 3 sends the build parameters flattened (nlist=...), which a server reads; milvus-lite 3.2 reads only
    # the older nested "params" entry and would build its default 128 lists: send both
    params.add_index(
        field_name="vector",
        index_type=spec["index_type"],
        metric_type=spec["metric_type"],
        params={**build, "params": dict(build)} if build else {},
    )
    return params


def _restore_structure(client, target: MilvusTarget, manifest: dict, root) -> None:
    """An append that changes the structure drops the vector index before building the new one; one stopped in
    between (the server killed) leaves a collection that cannot be loaded. It gets the manifest's index again,
    so that the manifest's version is searched and the next append can run."""
    if _call(target, "list the vector indexes", client.list_indexes, target.collection):
        return
    spec = manifest.get("search", {}).get("milvus")
    if not spec:
        raise MilvusCollectionError(
            f"{target.where()} has no vector index and the manifest records none; rebuild the index", root
        )
    _call(
        target,
        "build the vector index",
        client.create_index,
        target.collection,
        _params_of(client, spec),
        timeout=BUILD_TIMEOUT_S,
    )


def _create(client, target: MilvusTarget, dim: int) -> None:
    from pymilvus import DataType, MilvusClient

    schema = MilvusClient.create_schema(
        auto_id=False, enable_dynamic_field=False, description="polyvse photo index: one entity a photo"
    )
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=int(dim))
    schema.add_field("name", DataType.VARCHAR, max_length=TEXT_MAX)
    schema.add_field("path", DataType.VARCHAR, max_length=TEXT_MAX)
    _call(target, "create the collection", client.create_collection, target.collection, schema=schema)


def _insert(client, target: MilvusTarget, entries: Sequence[PhotoEntry], vectors: np.ndarray) -> None:
    for start in range(0, len(entries), INSERT_ROWS):
        rows = [
            {"id": e.id, "vector": v, "name": e.name, "path": e.path}
            for e, v in zip(entries[start : start + INSERT_ROWS], vectors[start : start + INSERT_ROWS])
        ]
        _call(target, "insert photos", client.insert, target.collection, rows)
    _call(target, "flush the collection", client.flush, target.collection, timeout=BUILD_TIMEOUT_S)


def _structure(client, target: MilvusTarget, kind: str, n: int, dim: int, drop: bool) -> dict:
    """(Re)create the vector index for ``kind`` over n rows and load the collection; returns its spec."""
    if drop:
        _call(target, "release the collection", client.release_collection, target.collection)
        _call(target, "drop the vector index", client.drop_index, target.collection, "vector")
    params, spec = _index_params(client, target, kind, n, dim)
    _call(target, "build the vector index", client.create_index, target.collection, params, timeout=BUILD_TIMEOUT_S)
    _call(target, "load the collection", client.load_collection, target.collection, timeout=BUILD_TIMEOUT_S)
    return spec


class _TunedSearch:
    """The FAISS search interface ``ann.tune_nprobe`` drives, answered by the collection at its ``nprobe``."""

    def __init__(self, index: MilvusPhotoIndex):
        self.index = index

    def search(self, queries: np.ndarray, k: int, params=None):
        # a whole probe set in one request, at up to every list: far longer than a served query at scale
        return self.index.raw_search(queries, k, nprobe=int(params.nprobe), timeout=BUILD_TIMEOUT_S)


def _search_section(
    index: MilvusPhotoIndex,
    vectors: np.ndarray,
    kind: str,
    spec: dict,
    exact_threshold: int,
    recall_target: float,
    trained_on: int,
) -> dict:
    """The manifest's search section, nprobe tuned against exact search over ``vectors`` (every stored row)."""
    common = dict(exact_threshold=exact_threshold, recall_target=recall_target)
    if kind == IVF:
        nlist = int(spec["params"]["nlist"])
        nprobe, recall = tune_nprobe(_TunedSearch(index), vectors, nlist, recall_target)
        section = search_section(IVF, recall=recall, nlist=nlist, nprobe=nprobe, trained_on=trained_on, **common)
        section["milvus"] = {**spec, "search_params": {"nprobe": nprobe}}
    else:
        section = search_section(EXACT, **common)
        section["milvus"] = {**spec, "search_params": {}}
    return section


def _write_manifest(root: Path, manifest: dict) -> dict:
    from .._version import __version__
    from ..util.atomic import write_json_atomic

    manifest = {
        **manifest,
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "polyvse_version": __version__,
        "files": {},
        "updated": now_iso(),
    }
    manifest.setdefault("created", manifest["updated"])
    root.mkdir(parents=True, exist_ok=True)
    write_json_atomic(root / MANIFEST, manifest)
    fsync_dir(root)
    for f in os.listdir(root):  # a FAISS index this build replaced (--force): its files go
        if _GEN_FILE.match(f):
            (root / f).unlink(missing_ok=True)
    return manifest


def check_milvus_build(target: MilvusTarget, similarity: str, kind: str, max_memory, overwrite: bool) -> None:
    """Refuse, before embedding anything, a Milvus build that cannot succeed: another similarity than cosine, a
    kind Milvus is not given here, a memory budget, an unreachable server, a collection in the way."""
    if similarity != "cosine":
        raise DataError(
            f"this model scores with the {similarity} similarity; Milvus ranks by inner product, so "
            "its index must be a FAISS one (--backend faiss)"
        )
    if kind not in ("auto", EXACT, IVF):
        raise DataError(
            f"--kind {kind} is FAISS-only; a Milvus index is exact (FLAT) or IVF (IVF_FLAT): use --kind "
            "auto, exact or ivf"
        )
    if max_memory is not None:
        raise DataError("--max-memory is for FAISS indexes; Milvus keeps a collection in its own memory and disk")
    client = connect(target, create=True)
    if _call(target, "look for the collection", client.has_collection, target.collection) and not overwrite:
        raise MilvusCollectionError(
            f"{target.where()} already exists; give another --collection, or --force to replace it"
        )


def write_milvus_index(
    root: Path,
    target: MilvusTarget,
    model_info: dict,
    photo_list: list[PhotoEntry],
    vectors: np.ndarray,
    kind: str,
    exact_threshold: int,
    recall_target: float,
) -> dict:
    """Fill a new collection with the photos and their ``vectors`` (stored rows), build its vector index (chosen
    as for FAISS) and write the folder's manifest. The caller holds ``index_lock(root)``."""
    client = connect(target, create=True)
    if _call(target, "look for the collection", client.has_collection, target.collection):
        _call(target, "drop the collection it replaces", client.drop_collection, target.collection)
    n, dim = vectors.shape
    chosen = choose_kind(n, "cosine", kind, exact_threshold)
    _create(client, target, dim)
    _insert(client, target, photo_list, vectors)
    spec = _structure(client, target, chosen, n, dim, drop=False)
    manifest = {"backend": target.to_manifest(), "model": model_info, "generation": 1, "count": n, "dim": int(dim)}
    index = MilvusPhotoIndex(root, {**manifest, "search": {"kind": chosen}}, target, client)
    search = _search_section(index, vectors, chosen, spec, exact_threshold, recall_target, trained_on=n)
    search["requested"] = kind
    return _write_manifest(root, {**manifest, "search": search, "created": now_iso()})


def open_index(root: Path, manifest: dict) -> MilvusPhotoIndex:
    """The index a manifest with a Milvus backend describes: its collection must be there, with the manifest's
    dimension (MilvusCollectionError otherwise, MilvusUnreachableError when nothing answers)."""
    target = MilvusTarget.from_manifest(manifest["backend"], root)
    client = connect(target)
    if not _call(target, "look for the collection", client.has_collection, target.collection):
        raise MilvusCollectionError(
            f"the index names {target.where()}, which is not there (dropped, or another server or database?); "
            f"rebuild it with `polyvse index build --backend milvus --uri {target.uri} --collection "
            f"{target.collection} --out {root} --force`",
            root,
        )
    described = _call(target, "describe the collection", client.describe_collection, target.collection)
    dims = [int(f.get("params", {}).get("dim", 0)) for f in described.get("fields", []) if f.get("name") == "vector"]
    if dims != [int(manifest["dim"])]:
        raise MilvusCollectionError(
            f"{target.where()} holds vectors of dimension {dims or 'none'}, the manifest "
            f"says {manifest['dim']}: it is not this index's collection; rebuild it",
            root,
        )
    state = _call(target, "read the collection's load state", client.get_load_state, target.collection)
    if "Loaded" not in str(state.get("state")):  # e.g. a server restarted since the build
        _restore_structure(client, target, manifest, root)
        _call(target, "load the collection", client.load_collection, target.collection, timeout=BUILD_TIMEOUT_S)
    return MilvusPhotoIndex(root, manifest, target, client)


# -- the opened index -------------------------------------------------------------------------------------
class _Cache:
    """Photo entries and vectors by id, least recently used dropped beyond ``capacity`` (thread-safe)."""

    def __init__(self, capacity: int):
        self.capacity = max(1, int(capacity))
        self._items: OrderedDict[int, tuple[PhotoEntry, np.ndarray]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, i: int):
        with self._lock:
            item = self._items.get(i)
            if item is not None:
                self._items.move_to_end(i)
            return item

    def put(self, i: int, item: tuple[PhotoEntry, np.ndarray]) -> None:
        with self._lock:
            self._items[i] = item
            self._items.move_to_end(i)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)


class MilvusPhotos(Sequence):
    """The photo entries of a Milvus index as a sequence by id, read from the collection when asked for."""

    def __init__(self, index: MilvusPhotoIndex):
        self.index = index

    def __len__(self) -> int:
        return self.index.count

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        j = int(i) + (len(self) if int(i) < 0 else 0)
        if not 0 <= j < len(self):
            raise IndexError(i)
        return self.index.fetch([j])[0][0]

    def __iter__(self):
        for entries, _ in self.index.read_all(with_vectors=False):
            yield from entries


class MilvusPhotoIndex(PhotoIndex):
    """A PhotoIndex whose photos and vectors live in a Milvus collection (see the module's note)."""

    def __init__(self, root: Path, manifest: dict, target: MilvusTarget, client):
        self.root = Path(root)
        self.manifest = manifest
        self.target = target
        self.client = client
        self._ann = None
        self._by_path = None
        self._device_vectors = None
        self.photos = MilvusPhotos(self)
        self._cache = _Cache(CACHE_BYTES // (4 * int(manifest["dim"]) + 256))
        self._loading = threading.Lock()

    @property
    def count(self) -> int:
        return int(self.manifest["count"])

    def __len__(self) -> int:
        return self.count

    @property
    def vectors(self) -> np.ndarray:
        """Every stored vector, read back from the collection (for an append's re-tuning; heavy at scale)."""
        parts = [v for _, v in self.read_all(with_vectors=True)]
        return np.concatenate(parts) if parts else np.zeros((0, self.dim), np.float32)

    def use_device(self, device) -> MilvusPhotoIndex:
        return self  # Milvus searches; nothing to copy to a GPU

    def describe(self) -> str:
        return f"{super().describe()}, Milvus {self.target.where()}"

    # -- reading --------------------------------------------------------------------------------------
    def _read(self, what: str, fn, timeout: float | None = None, **kwargs):
        """A search or read of the collection, bounded by ``timeout`` (QUERY_TIMEOUT_S). A collection the server no
        longer holds loaded (it restarted) is loaded again by the first request that finds it so; requests meanwhile
        are told to try again, so that a serving process recovers without a restart."""
        timeout = QUERY_TIMEOUT_S if timeout is None else timeout  # read when called: tests shorten it
        try:
            return _call(self.target, what, fn, self.target.collection, timeout=timeout, **kwargs)
        except MilvusNotLoadedError:
            if not self._loading.acquire(blocking=False):
                raise MilvusError(
                    f"{self.target.where()} is being loaded again (the server restarted); try again in a moment"
                ) from None
        try:
            _call(
                self.target,
                "load the collection",
                self.client.load_collection,
                self.target.collection,
                timeout=BUILD_TIMEOUT_S,
            )
        finally:
            self._loading.release()
        return _call(self.target, what, fn, self.target.collection, timeout=timeout, **kwargs)

    def _remember(self, row: dict) -> tuple[PhotoEntry, np.ndarray]:
        entity = row.get("entity", row)
        i = int(row["id"])
        item = (PhotoEntry(i, str(entity["name"]), str(entity["path"])), np.asarray(entity["vector"], np.float32))
        self._cache.put(i, item)
        return item

    def fetch(self, ids: Sequence[int]) -> list[tuple[PhotoEntry, np.ndarray]]:
        """(entry, vector) of each id, from the cache or in one request for the rest."""
        found = {int(i): self._cache.get(int(i)) for i in ids}
        missing = sorted(i for i, item in found.items() if item is None)
        if missing:
            rows = self._read("read photos", self.client.get, ids=missing, output_fields=FIELDS)
            found.update((int(r["id"]), self._remember(r)) for r in rows)
        if any(found.get(int(i)) is None for i in ids):
            lost = [int(i) for i in ids if found.get(int(i)) is None][:5]
            raise MilvusCollectionError(
                f"photos {lost} of the index are missing from {self.target.where()}; the "
                "collection was changed outside polyvse: rebuild the index",
                self.root,
            )
        return [found[int(i)] for i in ids]

    def vector(self, photo_id: int) -> np.ndarray:
        entry = self.photo(photo_id)
        return np.array(self.fetch([entry.id])[0][1], dtype=np.float32)

    def vectors_of(self, photo_ids) -> np.ndarray:
        """PhotoIndex.vectors_of: from the cache of the last search's hits, or in one request for the rest."""
        ids = [self.photo(int(i)).id for i in np.asarray(photo_ids).reshape(-1)]
        return np.array([v for _, v in self.fetch(ids)], dtype=np.float32).reshape(len(ids), self.dim)

    def read_all(self, *, with_vectors: bool) -> Iterator[tuple[list[PhotoEntry], np.ndarray | None]]:
        """The photos in id order, READ_ROWS at a time: (entries, their vectors or None)."""
        fields = FIELDS if with_vectors else ["name", "path"]
        for start in range(0, self.count, READ_ROWS):
            stop = min(start + READ_ROWS, self.count)
            # a read of every photo is a batch command's (index add, export), not a served request's: it gets the
            # longer bound, which a server that has just restarted and is warming its query nodes needs
            rows = self._read(
                "read photos",
                self.client.query,
                timeout=TIMEOUT_S,
                filter=f"id >= {start} and id < {stop}",
                output_fields=fields,
                limit=stop - start,
            )
            rows = sorted(rows, key=lambda r: int(r["id"]))
            if [int(r["id"]) for r in rows] != list(range(start, stop)):
                raise MilvusCollectionError(
                    f"photos {start}..{stop - 1} are not all in {self.target.where()}; the "
                    "collection was changed outside polyvse: rebuild the index",
                    self.root,
                )
            entries = [PhotoEntry(int(r["id"]), str(r["name"]), str(r["path"])) for r in rows]
            yield entries, (np.asarray([r["vector"] for r in rows], np.float32) if with_vectors else None)

    def ids_of_paths(self) -> dict[str, int]:
        if self._by_path is None:
            self._by_path = {p.path: p.id for entries, _ in self.read_all(with_vectors=False) for p in entries}
        return self._by_path

    # -- searching ------------------------------------------------------------------------------------
    def raw_search(
        self, queries: np.ndarray, k: int, *, nprobe: int | None = None, timeout: float | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(scores, ids) padded with -1, as FAISS answers: the collection's top-k among the manifest's rows, within
        ``timeout`` seconds (QUERY_TIMEOUT_S)."""
        q = np.ascontiguousarray(np.atleast_2d(queries), dtype=np.float32)
        params = {"metric_type": "IP", "params": {}}
        if self.kind == IVF:
            params["params"]["nprobe"] = int(nprobe or self.manifest["search"]["ivf"]["nprobe"])
        answer = self._read(
            "search",
            self.client.search,
            timeout,
            data=list(q),
            limit=int(k),
            filter=f"id < {self.count}",
            output_fields=FIELDS,
            search_params=params,
            anns_field="vector",
        )
        scores = np.full((len(q), k), -np.inf, np.float32)
        ids = np.full((len(q), k), -1, np.int64)
        for r, hits in enumerate(answer):
            for c, hit in enumerate(list(hits)[:k]):
                scores[r, c], ids[r, c] = float(hit["distance"]), int(hit["id"])
                self._remember(hit)
        return scores, ids

    def search(
        self, queries: np.ndarray, k: int, scorer=None, tuned_for: int | None = None, prior: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top-k by Milvus's own index; ``tuned_for`` and ``prior`` (PhotoIndex.search's) change nothing: it
        returns exact scores of its candidates."""
        q = np.ascontiguousarray(np.atleast_2d(np.asarray(queries, dtype=np.float32)))
        if q.shape[1] != self.dim:
            raise DataError(f"query vectors are {q.shape[1]}-d, the index holds {self.dim}-d vectors")
        k = int(min(max(int(k), 0), self.count))
        if k == 0:
            return np.zeros((len(q), 0), np.float32), np.zeros((len(q), 0), np.int64)
        return _drop_missing(*self.raw_search(q, k))

    # -- appending ------------------------------------------------------------------------------------
    def append(self, root: Path, new_entries: list[PhotoEntry], vectors: np.ndarray, model_info: dict) -> dict:
        """Insert ``new_entries`` (ids from ``count`` on) and their stored ``vectors``, re-choose the structure for
        the new size (exact -> IVF past the threshold; IVF rebuilt once it holds IVF_RETRAIN_GROWTH times what it
        was built on and a segment's lists would change), re-tune nprobe, and switch the manifest. The caller
        holds ``index_lock(root)``. A server that stops answering midway leaves the manifest as it was: the rows
        already inserted are past its count (never searched) and the next append deletes them first."""
        try:
            return self._append(root, new_entries, vectors, model_info)
        except MilvusDownError as exc:
            raise MilvusDownError(
                exc.target,
                exc.what,
                exc.detail,
                then=f"rerun the same `polyvse index add`: the index {root} still holds its {self.count} photos "
                f"(generation {self.manifest.get('generation', 0)}) and adds the {len(new_entries)} new ones "
                "then",
            ) from None

    def _append(self, root: Path, new_entries: list[PhotoEntry], vectors: np.ndarray, model_info: dict) -> dict:
        old = self.manifest["search"]
        t, client = self.target, self.client
        _call(t, "delete rows an interrupted append left", client.delete, t.collection, filter=f"id >= {self.count}")
        _insert(client, t, new_entries, vectors)
        n = self.count + len(new_entries)
        kind = choose_kind(n, "cosine", old.get("requested", "auto"), int(old["exact_threshold"]))
        trained_on = int(old.get("ivf", {}).get("trained_on", 0))
        regrown = (
            kind == IVF
            and n > IVF_RETRAIN_GROWTH * trained_on
            and nlist_for(t, n, self.dim) != old.get("ivf", {}).get("nlist")
        )
        if kind != old["kind"] or regrown:
            spec, trained_on = _structure(client, t, kind, n, self.dim, drop=True), n
        else:
            spec = {key: value for key, value in old["milvus"].items() if key != "search_params"}
        grown = MilvusPhotoIndex(root, {**self.manifest, "count": n, "search": {"kind": kind}}, t, client)
        all_vectors = grown.vectors if kind == IVF else np.zeros((0, self.dim), np.float32)
        search = _search_section(
            grown, all_vectors, kind, spec, int(old["exact_threshold"]), float(old["recall_target"]), trained_on
        )
        search["requested"] = old.get("requested", "auto")
        return _write_manifest(
            root,
            {
                **self.manifest,
                "model": model_info,
                "search": search,
                "count": n,
                "generation": int(self.manifest.get("generation", 0)) + 1,
            },
        )
