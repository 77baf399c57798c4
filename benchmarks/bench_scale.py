"""Scale: the compressed index (`polyvse index build --max-memory 8GB`) at 100k, 1M and 10M photos.

    python benchmarks/bench_scale.py --out runs/bench_scale.json [--sizes 100k,1m,10m] [--gaussian-sizes 100k,1m]
                                     [--data photos,gaussian] [--max-memory 8GB] [--queries 500]
                                     [--photos-index runs/model/index] [--checkpoint DIR] [--lang en] [--quick]
                                     [--no-penalties | --penalty-langs en] [--sweep-rerank-for 15,20,40]
                                     [--note "what this run stands for"]

For every data set and size, in child processes (one builds, a fresh one queries, so each one's peak memory is its
own):

  1. vectors are generated chunk by chunk straight into the index through the product's own code path,
     ``polyvse.index.write_compressed_index`` (the vectors file written as the chunks come, the lists trained on a
     sample, the codes added in chunks, nprobe and the re-ranking depth tuned to recall@10 0.95 against a chunked
     exact scan) under ``--max-memory``; the same chunks update the exact cosine top ``fetch(10)`` (110: see 2) of
     ``--queries`` held-out queries (a chunked scan: ground truth without holding the set). With the checkpoint's
     CSLS banks (see Scoring) the index also stores each vector's CSLS penalty r_C for every bank, as `polyvse index
     build` does for a CSLS checkpoint (``polyvse.csls.penalties.PenaltyWriter``, in chunks within
     ``--max-memory``); ``penalties_s`` is the time that took, part of ``build_s``; ``--no-penalties`` leaves them
     out (``penalties_s`` null), to measure the per-query r_C path of an index built with `--no-csls-penalties`;
     ``--penalty-langs en`` stores the columns of those query languages only (`polyvse index build
     --csls-penalty-langs en`: one bank's scan per vector instead of every bank's; ``penalty_keys`` says which).
     Build time excludes generating the vectors and the ground truth; the disk size is the index folder's. The
     build's peak resident memory (``build_peak_rss_bytes``, headline ``scale_<size>_build_peak_rss_gb``: what the
     budget must hold on the machine that builds) is the process's ``VmHWM`` from the moment the last chunk is in
     the vectors file, through training, adding, tuning, the penalties (banks included) and writing (the peak is
     reset then: ``/proc/self/clear_refs``); the peak while the vectors were generated, scanned for the truth and
     appended is ``generate_peak_rss_bytes``, the whole process's ``process_peak_rss_bytes`` (``ru_maxrss``; the
     build peak falls back to it where the reset is refused).
  2. a fresh process with one math thread (OpenMP, OpenBLAS, MKL) holds the checkpoint's CSLS banks, opens the
     index (``PhotoIndex.open``: photo list, codes, the vectors and penalties memory-mapped), after the vectors and
     penalties files were dropped from the page cache (``posix_fadvise DONTNEED``), and searches the held-out queries
     one at a time as text queries in ``--lang`` are searched by `polyvse search` and `polyvse serve`:
     ``polyvse.csls.penalties.csls_search`` (k 10), the index's cosine top ``fetch(10)`` = 110 re-ranked by CSLS
     against the banks (each candidate's r_C read from the stored penalties, whose banks digest is the checkpoint's;
     with ``--no-penalties`` computed against the language's caption bank). p50/p99 latency include the re-ranking: a
     cold first pass, then a warm second; then the ANN alone (``PhotoIndex.search``, k 10, warm: ``cosine``). Its
     peak resident memory (``VmHWM``, taken before the ground truth is worked out: banks, anonymous memory and the
     pages of the vectors and penalties files the searches touched) is ``rss_gb``.

  3. with ``--sweep-rerank-for``, for each value K a further fresh process, the files dropped from the page cache
     again, makes one cold pass of the same CSLS searches, the compressed index re-ranking the candidates of a
     top-K search (``csls_search(rerank_for=K)``, default 10: ``tuned_for``) with the prior as the product uses it:
     p50, p99 and recall@10 against the same truth, per K, in the run's ``rerank_sweep`` (the width against the
     recall, on the index the headline measured).

Ground truth. recall@10 (headline) is against the CSLS re-ranking of each query's EXACT cosine top 110 from the
chunked scan: CSLS over every vector would need each vector's r_C against the caption bank, ~10^14 flops at 10M,
out of reach of a 2-core machine; SearchHubness's own contract is that the CSLS top k lies in the cosine top
fetch(k) (the search tests check it against CSLS over every photo). ``cosine.recall_at_10`` is the ANN alone
against the exact cosine top 10.

Scoring: the CSLS banks are those of ``--checkpoint``, by default the checkpoint the photos index records (the
product model's, for runs/model/index), read without torch or the model's weights (``checkpoint_hubness``). A
checkpoint without CSLS, or no checkpoint (no photos index and no ``--checkpoint``), is searched by cosine alone, and
the notes say so; a data set whose width differs from the banks' likewise.

Data (``--data``):
  * ``photos``: drawn around real photo embeddings, the vectors of an index built by the product model
    (``--photos-index``, default runs/model/index, from `make model`): a photo picked at random plus Gaussian noise
    with the photos' own covariance scaled by ``--noise``, normalised. The noise scale (default ``auto``) is the one
    of NOISES whose synthetic vectors' IVF recall-against-nprobe curve, at the real collection's own size, is
    closest to the real vectors' (``calibration`` in the JSON has every curve, measured in the run). At 10M there
    are ~1,260 draws around each of 7,941 photos: dense clumps of near-duplicates, which flatter the coarse lists
    and tax the re-ranking. Its queries are caption-like: with CSLS banks, a caption of the ``--lang`` bank (the
    embeddings of training captions, one per training photo) picked at random plus Gaussian noise with the
    captions' own covariance at the same scale, normalised (text queries sit across the modality gap from the
    photos); without banks, drawn as the photos are. Without such an index this data set is skipped, saying so.
  * ``gaussian``: random Gaussian directions (``--dim``, default the photos' dimension or 1024): no structure at
    all, the worst case for any index; its queries are Gaussian too (re-ranked by CSLS where the banks fit).
    Beside the photos data set it runs at ``--gaussian-sizes`` (default 100k and 1M: 10M of it would add ~18
    minutes to `make bench` for a figure the headline does not use); where it stands in for the headline (no
    photos index), at ``--sizes``.

The headline keys ``scale_<size>_{rss_gb,build_peak_rss_gb,recall_at_10,p50_ms,p99_ms,build_s,disk_gb}`` (size
100k, 1m, 10m) come from the photos data set when it ran, else from the Gaussian one (``scale_data`` says which);
both are under ``runs``; ``scoring`` and the notes say whether the queries were re-ranked by CSLS. Time on the
shared 2-core machine (benchmarks/README.md): photos 100k + 1M + 10M with Gaussian 100k + 1M, about 30 minutes,
10M's build and generation most of it, without the penalties (``--no-penalties``); the penalties add a scan of
each stored bank per vector (``penalties_s``: over an hour at 10M for the product model's five banks on 2 cores, a
fifth of that with ``--penalty-langs en``, which `make bench` passes). ``--quick``: 5k vectors, 32 queries (smoke test; the
figures mean nothing). Not a test.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
K, CHUNK, SEED = 10, 65_536, 0
TRUTH_ROWS = 8192
SIZES = {"100k": 100_000, "1m": 1_000_000, "10m": 10_000_000, "5k": 5_000}
NOISES = (0.25, 0.35, 0.5, 0.7, 1.0)
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def log(msg: str) -> None:
    print(f"[bench_scale {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# -- data -----------------------------------------------------------------------------------------------------
def unit(x: np.ndarray) -> np.ndarray:
    """x's rows normalised, in place where x is float32 (the same numbers as a copy: one chunk's less memory)."""
    x = x.astype(np.float32, copy=False)
    x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    return x


class Source:
    """Seeded vectors, chunk by chunk: around real photos (``photos`` given) or Gaussian directions."""

    def __init__(self, dim: int, photos: np.ndarray | None = None, noise: float = 0.5):
        self.dim, self.photos, self.noise = dim, photos, noise
        if photos is not None:  # noise with the photos' covariance: z @ root, root = V sqrt(eigenvalues)
            centred = photos - photos.mean(0)
            values, vecs = np.linalg.eigh(centred.T @ centred / max(len(photos) - 1, 1))
            self.root = (vecs * np.sqrt(np.clip(values, 0, None))).T.astype(np.float32)

    def chunk(self, m: int, seed: int) -> np.ndarray:
        rng = np.random.default_rng(seed)
        z = rng.standard_normal((m, self.dim), dtype=np.float32)
        if self.photos is None:
            return unit(z)
        return unit(self.photos[rng.integers(0, len(self.photos), m)] + self.noise * (z @ self.root))

    def chunks(self, n: int, seed: int):
        for i, start in enumerate(range(0, n, CHUNK)):
            yield self.chunk(min(CHUNK, n - start), seed * 1_000_003 + i + 1)


def photo_vectors(path: Path | None) -> np.ndarray | None:
    if path is None or not (path / "manifest.json").is_file():
        return None
    from polyvse.index import PhotoIndex

    return np.asarray(PhotoIndex.open(path).vectors, dtype=np.float32)


def calibration(photos: np.ndarray, noises=NOISES) -> dict:
    """IVF-Flat recall@10 against nprobe at the real collection's size: real vectors (held-out queries) against
    vectors drawn around them at each noise scale; ``chosen_noise``: the closest curve (mean absolute difference)."""
    import faiss

    rng = np.random.default_rng(SEED)
    n_q = min(300, len(photos) // 10)
    perm = rng.permutation(len(photos))
    nlist = max(1, min(256, (len(photos) - n_q) // 39))

    def curve(base: np.ndarray, queries: np.ndarray) -> list[float]:
        truth = faiss.knn(queries, base, K, faiss.METRIC_INNER_PRODUCT)[1]
        ivf = faiss.index_factory(base.shape[1], f"IVF{nlist},Flat", faiss.METRIC_INNER_PRODUCT)
        ivf.train(base)
        ivf.add(base)
        out = []
        for nprobe in (1, 2, 4, 8, 16, 32):
            found = ivf.search(queries, K, params=faiss.SearchParametersIVF(nprobe=nprobe))[1]
            out.append(round(recall(found, truth), 3))
        return out

    result = {
        "nlist": nlist,
        "nprobe": [1, 2, 4, 8, 16, 32],
        "n": len(photos) - n_q,
        "real": curve(photos[perm[n_q:]], photos[perm[:n_q]]),
    }
    for noise in noises:
        src = Source(photos.shape[1], photos, noise)
        result[f"noise_{noise}"] = curve(src.chunk(len(photos) - n_q, 1), src.chunk(n_q, 2))
    gap = {noise: float(np.abs(np.subtract(result[f"noise_{noise}"], result["real"])).mean()) for noise in noises}
    result["mean_abs_difference"], result["chosen_noise"] = gap, min(gap, key=gap.get)
    return result


def recall(found: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(set(f.tolist()) & set(t.tolist())) / truth.shape[1] for f, t in zip(found, truth)]))


# -- children -------------------------------------------------------------------------------------------------
def build_child(
    root: str,
    n: int,
    dim: int,
    photos: np.ndarray | None,
    noise: float,
    queries: np.ndarray,
    depth: int,
    max_memory: int,
    hubness=None,
    penalty_keys: list[str] | None = None,
) -> dict:
    """Generate n vectors into a compressed index at root while scanning them for the queries' exact cosine top
    ``depth`` (best first); with ``hubness`` (CSLS banks), each vector's r_C stored as `polyvse index build` stores
    it (``penalties_s``: the seconds that took, within ``build_s``)."""
    import resource

    from polyvse.csls.penalties import PenaltyWriter
    from polyvse.index import PhotoEntry, write_compressed_index
    from polyvse.index.compressed import chunk_rows, compressed_lists, merge_topk, train_rows

    src = Source(dim, photos, noise)
    best_s = np.full((len(queries), 0), -np.inf, dtype=np.float32)
    best_i = np.zeros((len(queries), 0), dtype=np.int64)
    side = [0.0]  # seconds spent generating and scanning (not building)
    peaks: dict = {}

    def chunks():
        nonlocal best_s, best_i
        start = 0
        for chunk in src.chunks(n, SEED):
            for a in range(0, len(chunk), TRUTH_ROWS):  # queries x TRUTH_ROWS scores at a time
                s = -(queries @ chunk[a : a + TRUTH_ROWS].T)
                top = np.argpartition(s, min(depth, s.shape[1]) - 1, axis=1)[:, :depth]
                best_s, best_i = merge_topk(best_s, best_i, -np.take_along_axis(s, top, 1), top + start + a, depth)
            start += len(chunk)
            yield chunk
        peaks["generate"] = reset_peak()  # every vector is in the file: the build's own peak starts here

    photos_list = (
        PhotoEntry(i, f"photo-{i:08d}.jpg", f"/photos/{i // 10_000:04d}/photo-{i:08d}.jpg") for i in range(n)
    )
    t0 = time.perf_counter()
    manifest = write_compressed_index(
        Path(root),
        {"fingerprint": "sha256:bench", "similarity": "cosine"},
        photos_list,
        timed_gen(chunks(), side),
        dim=dim,
        exact_threshold=20_000,
        recall_target=0.95,
        max_memory=max_memory,
        csls=(PenaltyWriter(hubness, max_memory, keys=penalty_keys) if hubness is not None else None),
    )
    build_s = time.perf_counter() - t0 - side[0]
    disk = sum(f.stat().st_size for f in Path(root).iterdir() if f.is_file())
    np.save(Path(root) / ".queries.npy", queries)
    np.save(Path(root) / ".truth.npy", best_i)
    reset = peaks.get("generate") is not None  # the reset lowers ru_maxrss as well: the larger of the two phases
    process_peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, peaks.get("generate") or 0)
    return {
        "build_s": build_s,
        "penalties_s": manifest["csls"]["seconds"] if hubness is not None else None,
        "penalties": hubness is not None,
        "penalty_keys": manifest["csls"]["keys"] if hubness is not None else None,
        "generate_and_truth_s": side[0],
        "disk_bytes": disk,
        "search": manifest["search"],
        "build_peak_rss_bytes": status_bytes("VmHWM") if reset else process_peak,
        "build_peak_from": "VmHWM after the vectors were written" if reset else "ru_maxrss of the whole process",
        "generate_peak_rss_bytes": peaks.get("generate"),
        "process_peak_rss_bytes": process_peak,
        "chunk_rows": chunk_rows(dim, max_memory),
        "train_rows": train_rows(n, dim, compressed_lists(n), max_memory),
    }


def reset_peak() -> int | None:
    """This process's peak resident memory so far (VmHWM), then reset to the current one; None (and no reset)
    where /proc/self/clear_refs refuses."""
    before = status_bytes("VmHWM")
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return None
    return before


def timed_gen(gen, side: list[float]):
    """``gen``, with the time spent producing each item (random numbers, the exact scan) added to side[0]."""
    while True:
        t = time.perf_counter()
        try:
            item = next(gen)
        except StopIteration:
            return
        side[0] += time.perf_counter() - t
        yield item


def checkpoint_hubness(path: str | os.PathLike):
    """A checkpoint's CSLS banks as its text search uses them (``SearchHubness`` on the stored rows, as the query
    model reads them: not normalised again), read without torch and without its model weights; None for a checkpoint
    that ranks by its similarity alone."""
    from polyvse.csls.search import SearchHubness
    from polyvse.model.checkpoint import HubnessBankFile, read_checkpoint_config

    cfg = read_checkpoint_config(path)
    if not cfg.retrieval:
        return None
    return SearchHubness.from_bank_file(cfg.retrieval["k"], HubnessBankFile(cfg.weights))


def search_pass(
    index, queries: np.ndarray, hubness, lang: str | None, rerank_for: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Each query alone, timed: (ids (m, K), seconds (m,)). With CSLS banks through
    ``polyvse.csls.penalties.csls_search``, the call a CSLS model's text search makes (`polyvse search`, `polyvse
    serve`: the cosine top ``fetch(K)`` re-ranked by CSLS, which the timing includes); without, ``PhotoIndex.search``."""
    from polyvse.csls.penalties import csls_search

    times, found = [], []
    for q in queries:
        t = time.perf_counter()
        if hubness is None:
            ids = index.search(q[None, :], K)[1][0]
        else:
            ids = csls_search(index, hubness, q[None, :], K, lang, rerank_for=rerank_for)[1][0]
        times.append(time.perf_counter() - t)
        found.append(ids)
    return np.stack(found), np.asarray(times)


def csls_truth(index, hubness, queries: np.ndarray, candidates: np.ndarray, lang: str | None) -> np.ndarray:
    """The CSLS top K of each query among ``candidates``, its exact cosine top ``fetch(K)`` (the chunked scan's):
    CSLS over every vector would need each one's r_C against the caption bank (~10^14 flops at 10M), and
    SearchHubness's own contract is that the CSLS top K lies in the cosine top fetch(K)."""
    return np.stack([hubness.rerank(q, row, index.vectors_of(row), lang, K)[1] for q, row in zip(queries, candidates)])


def timings(seconds: np.ndarray) -> dict:
    ms = seconds * 1e3
    return {"p50_ms": float(np.percentile(ms, 50)), "p99_ms": float(np.percentile(ms, 99)), "mean_ms": float(ms.mean())}


def query_child(
    root: str, hubness, lang: str | None, passes: int = 2, rerank_for: int | None = None, sweep: bool = False
) -> dict:
    """Open the index cold and search the saved queries one at a time, with one math thread, as text queries in
    ``lang`` (re-ranked by CSLS where ``hubness`` holds banks); then the ANN alone (cosine, warm). ``rerank_for``:
    csls_search's (its default where None); ``sweep``: the found ids returned, not scored, and no ANN-alone pass."""
    import faiss

    from polyvse.index import PhotoIndex

    faiss.omp_set_num_threads(1)
    t = time.perf_counter()
    index = PhotoIndex.open(root)
    open_s = time.perf_counter() - t
    rss_open = status_bytes("VmRSS")
    queries, candidates = np.load(Path(root) / ".queries.npy"), np.load(Path(root) / ".truth.npy")
    out = {"open_s": open_s, "rss_after_open_bytes": rss_open, "passes": []}
    found = []
    for _ in range(passes):
        ids, seconds = search_pass(index, queries, hubness, lang, rerank_for)
        found.append(ids)
        out["passes"].append(timings(seconds))
    if not sweep:
        cosine_ids, seconds = search_pass(index, queries, None, lang) if hubness is not None else (found[-1], seconds)
    # the peak before the truth is worked out: that reads the vectors of every query's candidates
    out.update(
        peak_rss_bytes=status_bytes("VmHWM"),
        rss_anon_bytes=status_bytes("RssAnon"),
        rss_file_bytes=status_bytes("RssFile"),
    )
    if sweep:
        return {**out, "ids": found[-1]}
    cosine_truth = candidates[:, :K]
    truth = cosine_truth if hubness is None else csls_truth(index, hubness, queries, candidates, lang)
    for p, ids in zip(out["passes"], found):
        p["recall_at_10"] = recall(ids, truth)
    out["cosine"] = {**timings(seconds), "recall_at_10": recall(cosine_ids, cosine_truth)}
    out["truth_ids"] = truth  # for the sweep's recall (run_one drops it from the record)
    return out


def status_bytes(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    return 0


def in_child(fn, *args, env: dict | None = None):
    """fn(*args) in a fresh (spawned) process with ``env`` added to its environment."""
    saved = {k: os.environ.get(k) for k in env or {}}
    os.environ.update(env or {})
    try:
        with mp.get_context("spawn").Pool(1) as pool:
            return pool.apply(fn, args)
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)


def evict(path: Path) -> None:
    """Drop a file's pages from the page cache (they were written by the build: not dirty after its fsync)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


# -- one run ----------------------------------------------------------------------------------------------
def query_vectors(dim: int, photos: np.ndarray | None, hubness, cfg) -> np.ndarray:
    """The held-out queries of a data set: around the bank captions of ``cfg.lang`` (caption-like: text queries
    are searched) where the photos data set has CSLS banks, else drawn as the data set's own vectors."""
    if photos is not None and hubness is not None:
        bank = hubness.captions.get(cfg.lang)
        bank = np.concatenate(list(hubness.captions.values())) if bank is None else bank
        return Source(dim, bank, cfg.noise).chunk(cfg.queries, 999_983)
    return Source(dim, photos, cfg.noise).chunk(cfg.queries, 999_983)


def run_one(label: str, n: int, dim: int, photos: np.ndarray | None, cfg) -> dict:
    from polyvse.index import choose_kind

    hubness = cfg.hubness if cfg.hubness is not None and cfg.hubness.photos.shape[1] == dim else None
    work = Path(tempfile.mkdtemp(prefix=f"polyvse-scale-{label}-", dir=cfg.work_dir))
    root = work / "index"
    try:
        log(f"{label}: generating {n:,} x {dim} vectors into a compressed index ({root})")
        queries = query_vectors(dim, photos, hubness, cfg)
        depth = hubness.fetch(K) if hubness is not None else K  # the exact cosine candidates the truth needs
        keys = hubness.penalty_columns(cfg.penalty_langs) if hubness is not None and cfg.penalty_langs else None
        built = in_child(
            build_child,
            str(root),
            n,
            dim,
            photos,
            cfg.noise,
            queries,
            depth,
            cfg.max_memory_bytes,
            hubness if cfg.penalties else None,
            keys,
        )
        s = built["search"]
        stored = (
            f", of which {built['penalties_s']:.0f} s CSLS penalties ({', '.join(built['penalty_keys'])})"
            if built["penalties"]
            else ""
        )
        log(
            f"{label}: built in {built['build_s']:.0f} s{stored} ({s['ivfpq']['factory']}, nprobe "
            f"{s['ivfpq']['nprobe']}, depth {s['ivfpq']['depth']}, probe recall {s['measured_recall']:.3f}, build "
            f"peak RSS {built['build_peak_rss_bytes'] / 2**30:.2f} GiB); querying cold, one thread"
            + (
                f", re-ranked by CSLS ({cfg.lang}, r_C {'stored' if built['penalties'] else 'per query'})"
                if hubness is not None
                else ", cosine"
            )
        )
        files = json.loads((root / "manifest.json").read_text())["files"]
        cold_files = [root / name for name in (files["vectors"], files.get("penalties")) if name]
        for path in cold_files:
            evict(path)
        queried = in_child(query_child, str(root), hubness, cfg.lang, env=dict.fromkeys(THREAD_VARS, "1"))
        truth = queried.pop("truth_ids")
        cold, warm = queried["passes"]
        log(
            f"{label}: p50 {cold['p50_ms']:.2f} ms (warm {warm['p50_ms']:.2f}), recall@10 {cold['recall_at_10']:.3f} "
            f"(ANN alone: p50 {queried['cosine']['p50_ms']:.2f} ms, cosine recall@10 "
            f"{queried['cosine']['recall_at_10']:.3f}), peak RSS {queried['peak_rss_bytes'] / 2**30:.2f} GiB"
        )
        sweep = [
            sweep_point(str(root), cold_files, hubness, cfg.lang, r, s["ivfpq"]["depth"], truth)
            for r in (cfg.sweep_rerank_for if hubness is not None and "ivfpq" in s else [])
        ]
        return {
            "rerank_sweep": sweep,
            "n": n,
            "dim": dim,
            "csls": hubness is not None,
            **built,
            **queried,
            "cold": cold,
            "warm": warm,
            "auto_kind_under_budget": choose_kind(n, "cosine", dim=dim, max_memory=cfg.max_memory_bytes),
            "float_vectors_gb": n * dim * 4 / 2**30,
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def sweep_point(
    root: str, cold_files: list[Path], hubness, lang: str, rerank_for: int, depth: int, truth: np.ndarray
) -> dict:
    """One cold pass of the CSLS searches re-ranking the candidates of a top-``rerank_for`` search (a fresh
    process, the files dropped from the page cache again): p50/p99 and recall@10 against the same truth."""
    from polyvse.index.compressed import candidates_for

    for path in cold_files:
        evict(path)
    got = in_child(query_child, root, hubness, lang, 1, rerank_for, True, env=dict.fromkeys(THREAD_VARS, "1"))
    point = {
        "rerank_for": rerank_for,
        "candidates": candidates_for(rerank_for, depth),
        **got["passes"][0],
        "recall_at_10": recall(got["ids"], truth),
        "peak_rss_bytes": got["peak_rss_bytes"],
    }
    log(
        f"  re-ranking as for {rerank_for} ({point['candidates']} rows): p50 {point['p50_ms']:.2f} ms, p99 "
        f"{point['p99_ms']:.2f}, recall@10 {point['recall_at_10']:.3f}"
    )
    return point


def headline(runs: dict, data: str) -> dict:
    out = {"scale_data": data}
    for label, r in runs.get(data, {}).items():
        out.update(
            {
                f"scale_{label}_rss_gb": r["peak_rss_bytes"] / 2**30,
                f"scale_{label}_build_peak_rss_gb": r["build_peak_rss_bytes"] / 2**30,
                f"scale_{label}_recall_at_10": r["cold"]["recall_at_10"],
                f"scale_{label}_p50_ms": r["cold"]["p50_ms"],
                f"scale_{label}_p99_ms": r["cold"]["p99_ms"],
                f"scale_{label}_build_s": r["build_s"],
                f"scale_{label}_disk_gb": r["disk_bytes"] / 2**30,
            }
        )
    return out


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument(
        "--sizes",
        default="100k,1m,10m",
        help="the headline data set's sizes, comma-separated: 100k, 1m, 10m (default all three)",
    )
    ap.add_argument(
        "--gaussian-sizes",
        default="100k,1m",
        help="the Gaussian data set's sizes beside the photos one (default 100k,1m; where it stands in "
        "for the headline, --sizes)",
    )
    ap.add_argument("--data", default="photos,gaussian", help="photos, gaussian or both (default both)")
    ap.add_argument("--max-memory", default="8GB", help="the memory budget the index is built under")
    ap.add_argument("--queries", type=int, default=500, help="held-out queries (default 500)")
    ap.add_argument(
        "--noise", default="auto", help="noise scale around the photos, or auto: the calibrated one (default auto)"
    )
    ap.add_argument("--dim", type=int, default=None, help="Gaussian data's dimension (default: the photos' or 1024)")
    ap.add_argument(
        "--photos-index",
        type=Path,
        default=REPO / "runs" / "model" / "index",
        help="index whose vectors the photos data is drawn around (default runs/model/index)",
    )
    ap.add_argument(
        "--checkpoint",
        type=Path,
        default=None,
        help="checkpoint whose CSLS banks re-rank the queries (default: the one the photos index "
        "records; none without a photos index: cosine alone)",
    )
    ap.add_argument("--lang", default="en", help="the queries' language: its caption bank scores CSLS (default en)")
    ap.add_argument("--work-dir", default=None, help="where the indexes are built (default: the temp folder)")
    ap.add_argument(
        "--no-penalties",
        dest="penalties",
        action="store_false",
        help="store no CSLS penalties with the index: each query computes its candidates' r_C against "
        "the caption bank (an index built with `polyvse index build --no-csls-penalties`)",
    )
    ap.add_argument(
        "--penalty-langs",
        default=None,
        metavar="LANGS",
        help="store the penalties of these query languages' banks only, e.g. en (as `polyvse index build "
        "--csls-penalty-langs`; default: every bank, as the build's default)",
    )
    ap.add_argument(
        "--sweep-rerank-for",
        default="",
        metavar="KS",
        help="after the headline passes, one cold CSLS pass per value, e.g. 10,20,40: the compressed "
        "index re-ranks the candidates of a top-K search (csls_search's rerank_for): p50, p99 and "
        "recall@10 of each under the run's rerank_sweep",
    )
    ap.add_argument(
        "--check-disk",
        action="store_true",
        help="only check that the largest index fits in the work folder, then exit (run_all.py does so first)",
    )
    ap.add_argument("--quick", action="store_true", help="5k vectors, 32 queries (smoke test)")
    ap.add_argument(
        "--note",
        action="append",
        default=[],
        help="a line for the record's notes: what the run stands for (machine, load, budget); repeatable",
    )
    cfg = ap.parse_args(argv)
    cfg.sweep_rerank_for = [int(v) for v in cfg.sweep_rerank_for.split(",") if v.strip()]
    if cfg.quick:
        cfg.sizes, cfg.gaussian_sizes, cfg.queries = "5k", "5k", 32
    if cfg.penalty_langs is not None:
        cfg.penalty_langs = [c.strip() for c in cfg.penalty_langs.split(",") if c.strip()]
        if not cfg.penalties or not cfg.penalty_langs:
            ap.error(
                "--penalty-langs names the languages whose penalties are stored: not with --no-penalties, "
                "and at least one"
            )
    return cfg


def scoring_checkpoint(cfg, have_photos: bool) -> Path | None:
    """--checkpoint, else the checkpoint the photos index records (the model its users search it with)."""
    if cfg.checkpoint is not None or not have_photos:
        return cfg.checkpoint
    recorded = json.loads((cfg.photos_index / "manifest.json").read_text())["model"].get("checkpoint")
    if not recorded:
        raise SystemExit(f"bench_scale: {cfg.photos_index} does not record its checkpoint; pass --checkpoint")
    if not Path(recorded).is_dir():
        raise SystemExit(
            f"bench_scale: {cfg.photos_index} was built with checkpoint {recorded}, which is not there "
            "any more; pass --checkpoint with the same model"
        )
    return Path(recorded)


def scoring_note(cfg, checkpoint: Path | None, photos_data: bool) -> str:
    """What the queries were ranked by, for the record's notes."""
    h = cfg.hubness
    if h is None:
        why = (
            f"{checkpoint} ranks by its similarity alone"
            if checkpoint is not None
            else "no checkpoint (no photos index, no --checkpoint)"
        )
        return f"queries ranked by cosine alone, no CSLS: {why}"
    fetch = h.fetch(K)
    banks = (
        f"for the banks of the query languages {', '.join(cfg.penalty_langs)} only (--penalty-langs, as "
        "`polyvse index build --csls-penalty-langs`)"
        if cfg.penalty_langs
        else "for every bank"
    )
    penalties = (
        f"each indexed vector's r_C stored with the index as `polyvse index build` stores it, {banks} (its "
        "time is each run's penalties_s, within build_s), so a query reads its candidates' rows"
        if cfg.penalties
        else "no r_C stored with the index (--no-penalties, as `polyvse index build --no-csls-penalties`): "
        "each query computes its candidates' against the caption bank"
    )
    return (
        f"csls: each query is searched as `polyvse search` and `polyvse serve` search a {cfg.lang} text query "
        f"of {checkpoint} (CSLS k {h.k}; banks of {len(h.photos):,} training photos and of captions in "
        f"{', '.join(sorted(h.captions))}): polyvse.csls.penalties.csls_search, the index's cosine top {fetch} "
        f"re-ranked by CSLS; {penalties}; p50/p99 include the re-ranking. recall@10 is against the CSLS "
        f"re-ranking of each query's exact cosine top {fetch} (the chunked scan), not CSLS over every vector (the "
        f"r_C of each against the caption bank: ~10^14 flops at 10M); SearchHubness's contract is that the CSLS "
        f"top 10 lies in that set. The ANN alone (cosine, warm, against the exact cosine top 10) is each run's "
        "'cosine'."
        + (
            f" The photos data's queries are caption-like: drawn around the {cfg.lang} caption bank (embeddings "
            "of training captions) with the captions' own covariance at the photos' noise scale"
            if photos_data
            else ""
        )
    )


def disk_needed(n: int, dim: int) -> int:
    """Bytes a compressed index of ``n`` ``dim``-d vectors needs on disk while it is built: its float32 vectors
    file, plus a margin for the PQ codes, ids and CSLS penalties beside it (each run's disk_gb is the measure)."""
    return int(n * dim * 4 * 1.15) + 2**30


def planned_runs(cfg, data_sets: list[str], photos: np.ndarray | None) -> list[tuple[str, str, int]]:
    """(data set, size label, dimension) of every run main() will make, in order."""
    runs = []
    for data in data_sets:
        dim = photos.shape[1] if data == "photos" else (cfg.dim or (photos.shape[1] if photos is not None else 1024))
        sizes = cfg.gaussian_sizes if data == "gaussian" and "photos" in data_sets else cfg.sizes
        runs += [(data, label, dim) for label in sizes.split(",") if label]
    return runs


def check_disk(cfg, runs: list[tuple[str, str, int]]) -> str:
    """Refuse before building anything when the largest run's index would not fit in the work folder (each
    run's folder is deleted before the next starts, so the largest one is what must fit); else a line saying
    what fits."""
    work_dir = Path(cfg.work_dir or tempfile.gettempdir())
    if not runs:
        return f"no runs: nothing to build in {work_dir}"
    data, label, dim = max(runs, key=lambda r: disk_needed(SIZES[r[1]], r[2]))
    need, free = disk_needed(SIZES[label], dim), shutil.disk_usage(work_dir).free
    line = (
        f"the largest index ({data} {label}, {dim}-d) needs about {need / 2**30:.1f} GiB in {work_dir}; "
        f"{free / 2**30:.1f} GiB free"
    )
    if free < need:
        raise SystemExit(
            f"bench_scale: {line}: free some space there, point --work-dir at a folder with room, or leave {label} "
            "out of --sizes (and --gaussian-sizes)"
        )
    return line


def main(argv: list[str] | None = None) -> dict:
    from polyvse.index import parse_memory

    # run_all.py stops a step that overruns with SIGTERM: exit through the finally blocks, which delete the
    # indexes (up to 41 GB at 10M)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    cfg = parse(argv)
    cfg.max_memory_bytes = parse_memory(cfg.max_memory)
    photos = photo_vectors(cfg.photos_index)
    report: dict = {
        "quick": cfg.quick,
        "max_memory": cfg.max_memory,
        "queries": cfg.queries,
        "noise": cfg.noise,
        "photos_index": str(cfg.photos_index) if photos is not None else None,
        "runs": {},
        "notes": [],
    }
    report["notes"] += cfg.note
    data_sets = [d for d in cfg.data.split(",") if d]
    if "photos" in data_sets and photos is None:
        report["notes"].append(
            f"no photos data: {cfg.photos_index} holds no index (make model builds it); "
            "the Gaussian data set stands in for the headline"
        )
        data_sets.remove("photos")
    disk = check_disk(cfg, planned_runs(cfg, data_sets, photos))
    log(disk)
    if cfg.check_disk:
        print(disk)
        return report
    checkpoint = scoring_checkpoint(cfg, photos is not None)
    cfg.hubness = checkpoint_hubness(checkpoint) if checkpoint is not None else None
    report["scoring"] = {
        "csls": cfg.hubness is not None,
        "checkpoint": str(checkpoint) if checkpoint else None,
        "lang": cfg.lang,
        **(
            {
                "k": cfg.hubness.k,
                "fetch": cfg.hubness.fetch(K),
                "penalties": "stored" if cfg.penalties else "per query",
                "penalty_langs": cfg.penalty_langs,
            }
            if cfg.hubness
            else {}
        ),
    }
    report["notes"].append(scoring_note(cfg, checkpoint, "photos" in data_sets))
    if photos is not None:
        report["photos"] = {"n": len(photos), "dim": photos.shape[1]}
        report["calibration"] = calibration(photos)
        cfg.noise = report["calibration"]["chosen_noise"] if cfg.noise == "auto" else float(cfg.noise)
        report["noise"] = cfg.noise
    for data, label, dim in planned_runs(cfg, data_sets, photos):
        if cfg.hubness is not None and cfg.hubness.photos.shape[1] != dim and data not in report["runs"]:
            report["notes"].append(f"{data} data: {dim}-d, the banks {cfg.hubness.photos.shape[1]}-d: cosine alone")
        report["runs"].setdefault(data, {})[label] = run_one(
            f"{data} {label}", SIZES[label], dim, photos if data == "photos" else None, cfg
        )
        write_report(report, cfg, photos is not None, partial=True)  # a run stopped later keeps these
    write_report(report, cfg, photos is not None, partial=False)
    log(
        "headline: "
        + ", ".join(
            f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in report.items() if k.startswith("scale_")
        )
    )
    return report


def write_report(report: dict, cfg, photos_data: bool, partial: bool) -> None:
    """The record so far, written atomically (``partial``: sizes are still to come)."""
    from polyvse.provenance import index_model, no_model, provenance
    from polyvse.util.atomic import write_json_atomic

    report.update(headline(report["runs"], "photos" if "photos" in report["runs"] else "gaussian"))
    report.update(partial=partial, load_average_at_end=list(os.getloadavg()), python=platform.python_version())
    # the photos data set is drawn around the photo vectors of an index: that index's model
    report["provenance"] = provenance(
        model=index_model(cfg.photos_index) if photos_data else no_model("random Gaussian vectors")
    )
    cfg.out.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(cfg.out, report)


if __name__ == "__main__":
    main()
