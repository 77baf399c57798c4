"""FAISS against Milvus (embedded milvus-lite) side by side in one run, on the same vectors.

    python benchmarks/bench_milvus.py --out runs/bench_milvus.json [--size 1m] [--queries 200]
                                      [--photos-index runs/model/index] [--noise 0.5] [--dim 1024] [--quick]

One process, one data set, both backends through the product's own code path after embedding: the FAISS folder by
``polyvse.index.build.write_new_index`` and the Milvus collection by ``polyvse.index.milvus.write_milvus_index`` (the
two that `polyvse index build [--backend milvus]` ends in), with the same choice of structure (exact below 20,000
photos, IVF above, nlist from ``ann.ivf_lists``) and the same nprobe tuning to recall@10 0.95. Per backend:

  * ``build_s``: the write call (FAISS: k-means, filling the lists, tuning, writing the folder; Milvus: inserting
    every entity over gRPC, building its per-segment IVF_FLAT, loading, tuning against its own answers);
  * ``recall_at_10`` of ``--queries`` held-out queries against the exact top 10 (a FAISS flat scan);
  * ``p50_ms`` / ``p99_ms``: those queries one at a time through ``PhotoIndex.search`` (k 10), the way `polyvse
    search` and `polyvse serve` ask (Milvus's answer carries each hit's name, path and vector).

Vectors are drawn as benchmarks/bench_scale.py draws them (its ``Source``): around the photo vectors of an index
built by the product model (``--photos-index``, noise ``--noise``) when there is one, else random Gaussian
directions (``--dim``, default the photos' or 1024). Keys: ``{faiss,milvus}_<size>_{build_s,recall_at_10,p50_ms,
p99_ms}`` with the size as 1m, 100k, ... Milvus here is milvus-lite in this process (threads, a local file): a
server or cluster adds a network round trip to each query and spreads the build over its nodes. Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(HERE))
from bench_scale import Source, photo_vectors, recall  # noqa: E402  (the same vectors as the scale bench)

K, SEED, QUERY_SEED = 10, 0, 7


def log(msg: str) -> None:
    print(f"[bench_milvus {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def size_label(n: int) -> str:
    if n % 1_000_000 == 0:
        return f"{n // 1_000_000}m"
    return f"{n // 1000}k" if n % 1000 == 0 else str(n)


def parse_size(text: str) -> int:
    t = text.strip().lower().replace(",", "").replace("_", "")
    scale = {"k": 1000, "m": 1_000_000}.get(t[-1:], 1)
    return int(float(t[:-1] if scale > 1 else t) * scale)


def folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def latencies(index, queries: np.ndarray) -> tuple[np.ndarray, list[float]]:
    """Each query alone through PhotoIndex.search: (ids (m, k), seconds per query)."""
    index.search(queries[:1], K)  # warm: the first request pays connection and page-in costs
    ids, times = [], []
    for q in queries:
        t0 = time.perf_counter()
        ids.append(index.search(q[None, :], K)[1][0])
        times.append(time.perf_counter() - t0)
    return np.stack(ids), times


def measure(name: str, build, root: Path, queries: np.ndarray, truth: np.ndarray, disk: Path) -> dict:
    from polyvse.index import PhotoIndex

    log(f"{name}: building")
    t0 = time.perf_counter()
    manifest = build()
    build_s = time.perf_counter() - t0
    index = PhotoIndex.open(root)
    ids, times = latencies(index, queries)
    ms = np.asarray(times) * 1000
    s = manifest["search"]
    out = {
        "build_s": build_s,
        "recall_at_10": recall(ids, truth),
        "p50_ms": float(np.percentile(ms, 50)),
        "p99_ms": float(np.percentile(ms, 99)),
        "kind": s["kind"],
        "tuned_recall_at_10": s["measured_recall"],
        "ivf": s.get("ivf"),
        "disk_bytes": folder_bytes(disk),
        "structure": index.describe(),
    }
    log(
        f"{name}: build {build_s:.1f}s, recall@10 {out['recall_at_10']:.3f}, p50 {out['p50_ms']:.2f} ms, "
        f"p99 {out['p99_ms']:.2f} ms ({out['structure']})"
    )
    return out


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--size", default="1m", help="vectors in the collection: 1m, 100k, 250000, ... (default 1m)")
    ap.add_argument("--queries", type=int, default=200, help="held-out single queries (default 200)")
    ap.add_argument("--noise", type=float, default=0.5, help="noise scale around the photos (bench_scale's Source)")
    ap.add_argument("--dim", type=int, default=None, help="Gaussian data's dimension (default: the photos' or 1024)")
    ap.add_argument(
        "--photos-index",
        type=Path,
        default=REPO / "runs" / "model" / "index",
        help="index whose vectors the data is drawn around (default runs/model/index; Gaussian without)",
    )
    ap.add_argument("--work-dir", default=None, help="where both indexes are built (default: the temp folder)")
    ap.add_argument("--quick", action="store_true", help="5k vectors, 32 queries (smoke test)")
    cfg = ap.parse_args(argv)
    cfg.n = 5000 if cfg.quick else parse_size(cfg.size)
    cfg.queries = 32 if cfg.quick else cfg.queries
    return cfg


def main(argv: list[str] | None = None) -> dict:
    from polyvse.index.ann import exact_neighbours
    from polyvse.index.build import write_new_index
    from polyvse.index.defaults import DEFAULT_EXACT_THRESHOLD, DEFAULT_RECALL_TARGET
    from polyvse.index.milvus import target_for, write_milvus_index
    from polyvse.index.store import PhotoEntry
    from polyvse.provenance import index_model, no_model, provenance

    cfg = parse(argv)
    photos = photo_vectors(cfg.photos_index)
    dim = photos.shape[1] if photos is not None else (cfg.dim or 1024)
    data = "photos" if photos is not None else "gaussian"
    label = size_label(cfg.n)
    load_at_start = list(os.getloadavg())
    log(f"{cfg.n} {dim}-d vectors ({data}), {cfg.queries} queries; load {load_at_start}")
    source = Source(dim, photos, cfg.noise)
    vectors = np.concatenate(list(source.chunks(cfg.n, SEED)))
    queries = source.chunk(cfg.queries, QUERY_SEED)
    truth = exact_neighbours(vectors, queries, K)
    entries = [PhotoEntry(i, f"v{i}.jpg", f"/synthetic/v{i}.jpg") for i in range(cfg.n)]
    info = {"fingerprint": "sha256:synthetic", "similarity": "cosine", "checkpoint": None}
    common = dict(kind="auto", exact_threshold=DEFAULT_EXACT_THRESHOLD, recall_target=DEFAULT_RECALL_TARGET)
    work = Path(tempfile.mkdtemp(prefix="polyvse-bench-milvus-", dir=cfg.work_dir))
    try:
        faiss_root, milvus_root, lite = work / "faiss", work / "milvus", work / "milvus-lite" / "photos.db"

        def faiss_build() -> dict:
            write_new_index(faiss_root, info, "cosine", entries, vectors, **common)
            return json.loads((faiss_root / "manifest.json").read_text())

        target = target_for("milvus", str(lite), "bench", milvus_root)
        runs = {
            "faiss": measure("faiss", faiss_build, faiss_root, queries, truth, faiss_root),
            "milvus": measure(
                "milvus-lite",
                lambda: write_milvus_index(milvus_root, target, info, entries, vectors, **common),
                milvus_root,
                queries,
                truth,
                lite,
            ),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    import faiss
    import milvus_lite
    import pymilvus

    report = {
        "quick": cfg.quick,
        "size": cfg.n,
        "size_label": label,
        "dim": dim,
        "data": data,
        "queries": cfg.queries,
        "noise": cfg.noise if photos is not None else None,
        "k": K,
        "photos_index": str(cfg.photos_index) if photos is not None else None,
        "runs": runs,
        "versions": {
            "faiss": faiss.__version__,
            "pymilvus": pymilvus.__version__,
            "milvus_lite": getattr(milvus_lite, "__version__", None),
        },
        "omp_threads": faiss.omp_get_max_threads(),
        "machine": platform.node(),
        "cores": os.cpu_count(),
        "load_average_at_start": load_at_start,
        "load_average_at_end": list(os.getloadavg()),
        "python": platform.python_version(),
    }
    for backend, r in runs.items():
        report.update({f"{backend}_{label}_{key}": r[key] for key in ("build_s", "recall_at_10", "p50_ms", "p99_ms")})
    report["provenance"] = provenance(
        model=index_model(cfg.photos_index)
        if photos is not None
        else no_model("synthetic vectors (random Gaussian directions)")
    )
    cfg.out.parent.mkdir(parents=True, exist_ok=True)
    cfg.out.write_text(json.dumps(report, indent=2) + "\n")
    log(
        "headline: "
        + ", ".join(
            f"{k}={v:.3g}" for k, v in report.items() if k.startswith(("faiss_", "milvus_")) and isinstance(v, float)
        )
    )
    return report


if __name__ == "__main__":
    main()
