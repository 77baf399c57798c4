"""GPU benchmarks, skipped (with a line saying so) where torch sees no CUDA GPU.

    python benchmarks/bench_gpu.py --out gpu.json [--device cuda] [--photos 2000] [--vectors 10000000] [--quick]

On the GPU (``--device``, default cuda):
  * feature extraction, EfficientNet-Lite0 on real Flickr8K photos, end to end into a fresh cache
    (``extract_features`` with ``polyvse.device.loader_workers`` workers and pinned batches), fp32 and bf16
    autocast, plus the backbone alone on one preprocessed batch; min cosine of bf16 to fp32 features;
  * training throughput of the demo model: the real loop against the bare-kernel bound on the same GPU
    (``bench_train.measure_demo``), fp32 and bf16 autocast;
  * search over ``--vectors`` (10M) 512-d unit vectors, clustered as in bench_search.py: exact top-10 through torch on the GPU (what
    ``polyvse search`` runs for an exact index beside a GPU model), single query and batch of 256; IVF-Flat
    in FAISS (on the GPU when FAISS has GPU support, else FAISS on the CPU, as the JSON says), nprobe swept
    to recall@10 >= 0.95 against the exact top-10.
``--device cpu --quick`` runs the same code at tiny sizes on the CPU: a check of this script, not a benchmark.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

K = 10


def log(msg: str) -> None:
    print(f"[bench_gpu {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def source_commit() -> dict:
    """The commit the code ran from: what the caller put in $POLYVSE_SOURCE_COMMIT where it is set (a machine that
    got a copy of the working tree, whose .git, if any, need not match it: the record says so), else git's, with
    whether the tree was clean."""
    from polyvse.provenance import git_state

    state = git_state()
    if state.get("commit_from"):
        return {"commit": state["commit"], "commit_from": state["commit_from"]}
    return {"commit": state["commit"], "tree_clean": not state["dirty"]} if state["commit"] else {}


def gpu_info(device: torch.device) -> dict:
    if device.type != "cuda":
        return {"device": str(device)}
    p = torch.cuda.get_device_properties(device)
    return {
        "device": str(device),
        "name": p.name,
        "memory_gib": round(p.total_memory / 2**30, 1),
        "cuda": torch.version.cuda,
        "capability": f"{p.major}.{p.minor}",
    }


# -- feature extraction ---------------------------------------------------------------------------------
def bench_extract(device: torch.device, images: Path, n_photos: int, batch_size: int) -> dict:
    from bench_extract import end_to_end, photo_paths

    from polyvse.device import loader_workers
    from polyvse.features import get_extractor, load_image

    paths = photo_paths(images, n_photos)
    workers = loader_workers(device)
    out: dict = {"photos": len(paths), "workers": workers, "batch_size": batch_size}
    feats = {}
    for precision in ("fp32", "bf16") if device.type == "cuda" else ("fp32",):
        ext = get_extractor("efficientnet-lite0").to(device, precision)
        batch = torch.stack([ext.transform(load_image(p)) for p in paths[:batch_size]])
        ext.forward_batch(batch)  # warm-up: cuDNN picks its kernels
        sync(device)
        t0, rounds = time.perf_counter(), 5
        for _ in range(rounds):
            ext.forward_batch(batch)
        sync(device)
        alone = rounds * len(batch) / (time.perf_counter() - t0)
        run = end_to_end(paths, ext, workers, batch_size)
        feats[precision] = run.pop("features")
        out[precision] = {"end_to_end_photos_per_s": run["photos_per_s"], "backbone_alone_photos_per_s": alone}
        log(f"extract {precision}: {run['photos_per_s']:.0f} photos/s end to end, backbone alone {alone:.0f}/s")
    if "bf16" in feats:
        a, b = feats["fp32"], feats["bf16"]
        cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1) + 1e-12)
        out["bf16_min_cosine_to_fp32"] = float(cos.min())
    return out


# -- training -----------------------------------------------------------------------------------------------
def bench_train(device: torch.device, root: Path, epochs: int, quick: bool, languages=None) -> dict:
    from bench_train import measure_demo

    out = {}
    for precision in ("fp32", "bf16") if device.type == "cuda" else ("fp32",):
        r = measure_demo(root, epochs, quick, device, precision, languages)
        out[precision] = r
        log(
            f"train {precision}: {r['train_real_captions_per_s']:.0f} captions/s, bound "
            f"{r['train_bound_captions_per_s']:.0f}, ratio {r['train_throughput_ratio']:.2f}"
        )
    return out


# -- search ----------------------------------------------------------------------------------------------------
def latencies(fn, repeats: int, device: torch.device) -> dict:
    from bench_search import stats_ms

    fn()  # warm-up
    times = []
    for _ in range(repeats):
        sync(device)
        t0 = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - t0)
    return stats_ms(times)


def bench_search(device: torch.device, n: int, dim: int, quick: bool, ivf: bool = True) -> dict:
    from bench_search import ClusteredSphere

    from polyvse.index.store import torch_exact_topk

    data = ClusteredSphere(dim, n_clusters=max(10, n // 100), noise=0.75, seed=0)  # ~100 points a cluster
    host, labels = np.empty((n, dim), np.float32), np.empty(n, np.int32)
    data.fill(host, labels)
    queries = data.sample(256, gen=torch.Generator().manual_seed(1))[0]  # held out, same distribution
    vectors = torch.from_numpy(host).to(device)
    repeats = 3 if quick else 20
    out = {
        "vectors": n,
        "dim": dim,
        "data": "bench_search.py's clustered unit vectors (~100 a cluster), 256 held-out queries",
        "exact_torch_single": latencies(lambda: torch_exact_topk(vectors, queries[:1], K), repeats, device),
        "exact_torch_batch_256": latencies(lambda: torch_exact_topk(vectors, queries, K), repeats, device),
    }
    truth = torch_exact_topk(vectors, queries, K)[1]
    log(
        f"exact {n:,} x {dim}: p50 {out['exact_torch_single']['p50_ms']:.2f} ms single, "
        f"{out['exact_torch_batch_256']['p50_ms']:.1f} ms for 256 queries"
    )
    del vectors
    if device.type == "cuda":
        torch.cuda.empty_cache()
    out["ivf"] = (
        bench_ivf(host, queries, truth, device, repeats, quick)
        if ivf
        else "not run (--skip-ivf): FAISS's IVF on the CPU is make bench's bench_search.py"
    )
    return out


def bench_ivf(
    host: np.ndarray, queries: np.ndarray, truth: np.ndarray, device: torch.device, repeats: int, quick: bool
) -> dict:
    import faiss
    from bench_search import recall_at_k

    n, dim = host.shape
    nlist = 64 if quick else 4096  # ~2,400 vectors per list at 10M; k-means on 39 x nlist samples
    on_gpu = device.type == "cuda" and hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0
    t0 = time.perf_counter()
    index = faiss.index_factory(dim, f"IVF{nlist},Flat", faiss.METRIC_INNER_PRODUCT)
    if on_gpu:
        resources = faiss.StandardGpuResources()
        index = faiss.index_cpu_to_gpu(resources, device.index or 0, index)
    sample = host[np.random.default_rng(0).choice(n, size=min(n, 39 * nlist), replace=False)]
    index.train(sample)
    for s in range(0, n, 1 << 20):
        index.add(host[s : s + (1 << 20)])
    build = time.perf_counter() - t0
    out = {
        "faiss": "GPU" if on_gpu else "CPU (this FAISS has no GPU support)",
        "nlist": nlist,
        "build_s": build,
        "sweep": {},
    }
    for nprobe in (1, 2, 4, 8, 16, 32, 64, 128, 256):
        index.nprobe = nprobe
        found = index.search(queries, K)[1]
        recall = recall_at_k(found, truth)
        single = latencies(lambda: index.search(queries[:1], K), repeats, device)
        out["sweep"][nprobe] = {"recall_at_10": recall, "single": single}
        log(f"IVF{nlist} nprobe {nprobe}: recall@10 {recall:.3f}, p50 {single['p50_ms']:.2f} ms")
        if recall >= 0.95:
            out["cheapest_at_target"] = {"nprobe": nprobe, "recall_at_10": recall, "p50_ms": single["p50_ms"]}
            break
    return out


def main(argv: list[str] | None = None) -> int:
    from polyvse.device import cuda_available, resolve_device
    from polyvse.util.atomic import write_json_atomic
    from polyvse.util.paths import data_root

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--device", help="default: cuda, and skip the whole run where there is none")
    ap.add_argument("--data-root", help="data root (default: $POLYVSE_DATA, else ~/.cache/polyvse)")
    ap.add_argument("--images", type=Path, help="folder of photos (default: <data root>/flickr8k/images)")
    ap.add_argument("--photos", type=int, default=2000, help="photos for the extraction run")
    ap.add_argument("--vectors", type=int, default=10_000_000, help="vectors for the search runs")
    ap.add_argument("--epochs", type=int, default=2, help="training epochs; the last one is measured")
    ap.add_argument("--quick", action="store_true", help="tiny sizes (a check of the script)")
    ap.add_argument("--languages", help="the demo training's languages, comma-separated (default: the config's)")
    ap.add_argument(
        "--skip-ivf",
        action="store_true",
        help="exact search only (a machine without faiss, or without time for 10M k-means)",
    )
    args = ap.parse_args(argv)
    if args.device is None and not cuda_available():
        line = "GPU benchmarks skipped: torch sees no CUDA GPU on this machine"
        print(line, flush=True)
        write_json_atomic(args.out, {"skipped": line})
        return 0
    device = resolve_device(args.device or "cuda")
    root = data_root(args.data_root)
    photos, vectors = (16, 20_000) if args.quick else (args.photos, args.vectors)
    result = {"gpu": gpu_info(device), "quick": args.quick, "torch": torch.__version__, **source_commit()}
    result["extract"] = bench_extract(
        device, args.images or root / "flickr8k" / "images", photos, batch_size=8 if args.quick else 128
    )
    langs = args.languages.split(",") if args.languages else None
    result["command"] = "python benchmarks/bench_gpu.py " + " ".join(argv if argv is not None else sys.argv[1:])
    result["train"] = bench_train(device, root, args.epochs, args.quick, langs)
    result["search"] = bench_search(device, vectors, 512, args.quick, ivf=not args.skip_ivf)
    from polyvse.provenance import no_model, provenance

    result["provenance"] = provenance(result["command"], no_model("demo trainings and synthetic vectors (not kept)"))
    write_json_atomic(args.out, result)
    print(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
