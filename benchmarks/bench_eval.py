"""Time polyvse.evaluation.ranking.retrieval_metrics on a random 5k-image x 25k-caption score matrix.

    python benchmarks/bench_eval.py --out runs/bench_eval.json [--images 5000] [--captions-per-image 5]

Prints the seconds per call and writes them (plus the setup) as JSON to --out. Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from polyvse.evaluation import coco_5fold_metrics
from polyvse.evaluation.ranking import retrieval_metrics


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path, help="JSON file to write the timings to")
    ap.add_argument("--images", type=int, default=5000)
    ap.add_argument("--captions-per-image", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    n_img, n_cap = args.images, args.images * args.captions_per_image
    rng = np.random.default_rng(args.seed)
    t0 = time.perf_counter()
    sim = rng.standard_normal((n_img, n_cap), dtype=np.float32)
    caption_image = rng.permutation(np.repeat(np.arange(n_img), args.captions_per_image))
    setup_s = time.perf_counter() - t0

    def timed(fn) -> tuple[list[float], dict]:
        times, result = [], None
        for _ in range(args.repeats):
            t = time.perf_counter()
            result = fn()
            times.append(time.perf_counter() - t)
        return times, result

    numpy_s, metrics = timed(lambda: retrieval_metrics(sim, caption_image))
    sim_t = torch.from_numpy(sim)
    torch_s, _ = timed(lambda: retrieval_metrics(sim_t, torch.from_numpy(caption_image)))
    folds = 5 if n_img % 5 == 0 else 1
    coco_s, _ = timed(lambda: coco_5fold_metrics(sim, caption_image, n_folds=folds))

    report = {
        "n_images": n_img,
        "n_captions": n_cap,
        "dtype": str(sim.dtype),
        "repeats": args.repeats,
        "retrieval_metrics_numpy_s": numpy_s,
        "retrieval_metrics_torch_s": torch_s,
        f"coco_{folds}fold_metrics_s": coco_s,
        "median_s": statistics.median(numpy_s),
        "setup_s": setup_s,
        "metrics": metrics,
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "torch": torch.__version__,
    }
    print(
        f"retrieval_metrics {n_img} images x {n_cap} captions: "
        f"median {statistics.median(numpy_s):.3f}s (numpy input), "
        f"{statistics.median(torch_s):.3f}s (torch input); "
        f"coco {folds}-fold {statistics.median(coco_s):.3f}s; random-score rsum {metrics['rsum']:.2f}"
    )
    from polyvse.provenance import no_model, provenance

    report["provenance"] = provenance(model=no_model("random score matrices (the metrics' cost alone)"))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")
    return report


if __name__ == "__main__":
    main()
