"""torch against ONNX Runtime for the two frozen fronts whose outputs a build caches (polyvse.util.frozen_onnx):

  * e5's front cut before its last layer (``E5Front`` / ``OnnxE5Front``, the states entering the trainable
    tail) over real Multi30K training captions, en and de, in the build's batching (``states`` over chunks of
    the state cache's shard size, 64 length-sorted sentences a pass);
  * EfficientNet-Lite2 cut before its last block (``efficientnet-lite2:tail1``: ``BackboneCutExtractor``'s
    ``forward_batch`` with POLYVSE_FRONT_RUNTIME torch / onnx) over real flickr8k-224 photos, decoded and
    preprocessed once beforehand (the decoding is the same for both), 32 photos a batch as extract_features
    passes them.

Each runtime runs ``--repeats`` times, the two alternating, at ``--threads`` threads (torch's, and ONNX
Runtime's intra-op pool); the best wall time of each is the figure (the machine is shared: the best is the run
least disturbed), with every run's wall and process CPU seconds and the load average beside it. Agreement:
over every real token's state row / every photo's map, the largest absolute difference and the lowest cosine;
and what the model reads of them: the sentence vectors of e5's untrained last layer over both runtimes' states,
the pooled 1280-d features of Lite2's untrained last block over both maps. The one-off costs (export, session
load) are given apart.

    python benchmarks/bench_frozen_fronts.py [--out benchmarks/results/frozen_fronts.json] [--data DIR]
        [--sentences 2000] [--photos 300] [--threads 2] [--repeats 2] [--quick]

Not a test.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "frozen_fronts.json")
    ap.add_argument("--data", type=Path, default=Path(os.environ.get("POLYVSE_DATA", REPO / ".data")))
    ap.add_argument("--sentences", type=int, default=2000, help="Multi30K training captions, half en, half de")
    ap.add_argument("--photos", type=int, default=300, help="flickr8k-224 photos (the first, by file name)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="tiny sizes, one repeat: checks the script runs")
    args = ap.parse_args(argv)
    if args.quick:
        args.sentences, args.photos, args.repeats = 40, 8, 1
    return args


def _timed(fn):
    load0, w0, c0 = os.getloadavg()[0], time.perf_counter(), time.process_time()
    out = fn()
    return out, {
        "wall_s": round(time.perf_counter() - w0, 3),
        "cpu_s": round(time.process_time() - c0, 3),
        "load_avg_1min": round((load0 + os.getloadavg()[0]) / 2, 2),
    }


def _race(runs: dict, repeats: int) -> tuple[dict, dict]:
    """Each of ``runs`` (name -> fn) ``repeats`` times, alternating: (last output per name, timings per name)."""
    outs, times = {}, {name: [] for name in runs}
    for _ in range(repeats):
        for name, fn in runs.items():
            outs[name], t = _timed(fn)
            times[name].append(t)
    return outs, times


def _agreement(a, b) -> dict:
    import numpy as np

    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    cos = (a * b).sum(1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-30)
    return {
        "rows": int(len(a)),
        "max_abs_diff": float(np.abs(a - b).max()),
        "min_cosine": float(cos.min()),
        "mean_cosine": float(cos.mean()),
    }


def _summary(times: dict, items: int, unit: str) -> dict:
    best = {name: min(t["wall_s"] for t in runs) for name, runs in times.items()}
    cpu = {name: min(t["cpu_s"] for t in runs) for name, runs in times.items()}
    return {
        "runs": times,
        "best_wall_s": best,
        f"{unit}_per_s": {name: round(items / s, 2) for name, s in best.items()},
        "speedup_onnxruntime_over_torch": round(best["torch"] / best["onnxruntime"], 3),
        "best_cpu_s": cpu,
        "cpu_ratio_torch_over_onnxruntime": round(cpu["torch"] / cpu["onnxruntime"], 3),
    }


def _sentences(data: Path, n: int) -> list[str]:
    raw = data / "multi30k" / "data" / "task1" / "raw"
    out = []
    for lang, k in (("en", n - n // 2), ("de", n // 2)):
        path = raw / f"train.{lang}.gz"
        if not path.is_file():
            sys.exit(f"{path}: missing; fetch the data first (POLYVSE_DATA={data})")
        out += gzip.open(path, "rt", encoding="utf-8").read().splitlines()[:k]
    return out


def bench_e5(texts: list[str], threads: int, repeats: int, tmp: Path) -> dict:
    import numpy as np
    import torch

    from polyvse.modules.pretrained.e5.front_onnx import OnnxE5Front
    from polyvse.modules.pretrained.e5.tail import E5Front, TextTail, pad_states

    torch_front = E5Front(1)
    torch_front.file.piece_index()  # the tokenizer's one-off index, not a per-caption cost
    ort_front = OnnxE5Front(1, cache_dir=tmp, threads=threads)
    _, export = _timed(lambda: ort_front.session)  # exports the graph, then loads it

    def run(front):
        chunk = 1024  # the state cache's shard size: what states_cached hands the front at a time
        return [s for i in range(0, len(texts), chunk) for s in front.states(texts[i : i + chunk])]

    outs, times = _race({"torch": lambda: run(torch_front), "onnxruntime": lambda: run(ort_front)}, repeats)
    a, b = outs["torch"], outs["onnxruntime"]
    tail = TextTail.from_file(1).eval()

    def vectors(states):
        with torch.inference_mode():
            return np.concatenate([tail(*pad_states(states[i : i + 256])).numpy() for i in range(0, len(states), 256)])

    tokens = sum(len(s) for s in a)
    return {
        "what": "e5-small front, cut 1 (embeddings + 11 layers), float16 states as cached",
        "sentences": len(texts),
        "tokens": int(tokens),
        "batch": "chunks of 1024, 64 length-sorted a pass",
        "one_off_export_and_load_s": export["wall_s"],
        "graph_bytes": ort_front.path.stat().st_size,
        **_summary(times, len(texts), "sentences"),
        "agreement_token_states": _agreement(np.concatenate(a), np.concatenate(b)),
        "agreement_sentence_vectors_untrained_tail": _agreement(vectors(a), vectors(b)),
    }


def _photo_batches(data: Path, n: int, extractor) -> list:
    import torch

    from polyvse.features import load_image, read_image_bytes

    folder = data / "flickr8k-224" / "images"
    if not folder.is_dir():
        sys.exit(f"{folder}: missing; fetch the data first (POLYVSE_DATA={data})")
    paths = sorted(folder.iterdir())[:n]
    crops = [extractor.transform(load_image(read_image_bytes(p), name=str(p))) for p in paths]
    return [torch.stack(crops[i : i + 32]) for i in range(0, len(crops), 32)]


def bench_photos(data: Path, n: int, threads: int, repeats: int, tmp: Path) -> dict:
    import numpy as np
    import torch

    from polyvse.features.backbones import get_extractor
    from polyvse.util.frozen_onnx import RUNTIME_ENV

    ext = get_extractor("efficientnet-lite2:tail1")
    ext.keep_graphs_in(tmp / "features" / "onnx")  # as extract_features does
    ext.graph.threads = threads
    batches = _photo_batches(data, n, ext)
    photos = sum(len(b) for b in batches)

    def run(runtime: str):
        os.environ[RUNTIME_ENV] = runtime
        assert ext.runtime == runtime
        return np.concatenate([ext.forward_batch(b).numpy() for b in batches])

    _, export = _timed(lambda: (os.environ.__setitem__(RUNTIME_ENV, "onnx"), ext.graph.session(ext)))
    outs, times = _race({"torch": lambda: run("torch"), "onnxruntime": lambda: run("onnx")}, repeats)
    os.environ.pop(RUNTIME_ENV)
    a, b = outs["torch"], outs["onnxruntime"]
    tail = ext.tail_module().eval()
    with torch.inference_mode():
        pa, pb = tail(torch.from_numpy(a)).numpy(), tail(torch.from_numpy(b)).numpy()
    return {
        "what": f"efficientnet-lite2 cut before its last block: stem + blocks -> {ext.map_shape} map, float32",
        "photos": photos,
        "batch": "32 photos, 16 crops a pass",
        "cache_key_torch": ext.key,
        "cache_key_onnxruntime": ext.key + ".ort",
        "one_off_export_and_load_s": export["wall_s"],
        **_summary(times, photos, "photos"),
        "agreement_maps": _agreement(a, b),
        "agreement_pooled_untrained_tail": _agreement(pa, pb),
    }


def _versions() -> dict:
    import numpy
    import onnx
    import onnxruntime
    import torch

    return {
        "torch": torch.__version__,
        "onnxruntime": onnxruntime.__version__,
        "onnx": onnx.__version__,
        "numpy": numpy.__version__,
    }


def main(argv=None) -> int:
    args = _parse(argv)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    sys.path.insert(0, str(REPO / "src"))
    import torch

    torch.set_num_threads(args.threads)
    from polyvse.device import cpu_has_native_bf16
    from polyvse.provenance import git_state, no_model, provenance
    from polyvse.util.atomic import write_json_atomic

    tree = git_state()  # the checkout as the run starts
    with tempfile.TemporaryDirectory(prefix="bench-frozen-fronts-") as tmp:
        photos = bench_photos(args.data, args.photos, args.threads, args.repeats, Path(tmp))
        e5 = bench_e5(_sentences(args.data, args.sentences), args.threads, args.repeats, Path(tmp))
    record = {
        "benchmark": "frozen fronts: torch vs ONNX Runtime (CPU)",
        "threads": args.threads,
        "repeats": args.repeats,
        "quick": args.quick,
        "cpu_native_bf16": cpu_has_native_bf16(),
        "versions": _versions(),
        "data": {
            "root": str(args.data),
            "sentences": f"Multi30K train.en / train.de, the first {args.sentences} lines split evenly",
            "photos": f"flickr8k-224/images, the first {args.photos} by file name",
        },
        "e5_front": e5,
        "photo_front": photos,
        "note": "best of the alternating runs' wall times; cpu_s is process CPU (all threads); the machine is "
        "shared, so the load average is given with each run",
        "provenance": provenance(
            model=no_model("pretrained frozen fronts (e5-small, EfficientNet-Lite2); no polyvse checkpoint"), tree=tree
        ),
    }
    write_json_atomic(args.out, record)
    print(
        json.dumps(
            {
                "e5": {k: e5[k] for k in ("sentences_per_s", "speedup_onnxruntime_over_torch")},
                "e5_agreement": e5["agreement_token_states"],
                "photos": {k: photos[k] for k in ("photos_per_s", "speedup_onnxruntime_over_torch")},
                "photo_agreement": photos["agreement_maps"],
                "out": str(args.out),
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
