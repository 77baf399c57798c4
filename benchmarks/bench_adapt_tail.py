"""The trained e5 tail over a new language's lines, as the adaptation stage runs it: batches in the file's order
against batches of about one length (polyvse.adaptation.line_vectors), on real MultiScript30k lines.

A batch is padded to its longest line, and attention runs over that padded layout (every other step of the tail
computes the real tokens only), so one long line makes its whole batch pay for its length. The lines' front states
(e5 cut before its last layer) are computed once and then fed to e5's untrained last layer in both orders, each
``--repeats`` times, alternating; the best wall time of each is the figure, with every run's beside it and the load
average. The two orders' vectors are compared row by row.

    python benchmarks/bench_adapt_tail.py [--out benchmarks/results/adapt_tail.json] [--lang qu] [--lines 2000]
        [--threads 2] [--repeats 3]

Not a test.
"""

from __future__ import annotations

import argparse
import gzip
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BATCH = 256  # line_vectors' batch size


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "adapt_tail.json")
    ap.add_argument("--data", type=Path, default=Path(os.environ.get("POLYVSE_DATA", REPO / ".data")))
    ap.add_argument("--lang", default="qu", help="a MultiScript30k language (default %(default)s)")
    ap.add_argument("--lines", type=int, default=2000, help="the first N training lines (default %(default)s)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    sys.path.insert(0, str(REPO / "src"))
    import numpy as np
    import torch

    from polyvse.device import cpu_has_native_bf16
    from polyvse.modules.pretrained.e5.tail import E5Front, TextTail, pad_states
    from polyvse.provenance import git_state, no_model, provenance
    from polyvse.util.atomic import write_json_atomic

    torch.set_num_threads(args.threads)
    tree = git_state()
    path = args.data / "multiscript30k" / f"en-{args.lang}" / f"train.{args.lang}.gz"
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        lines = [line.strip() for line in fh][: args.lines]
    t0 = time.perf_counter()
    states = E5Front(1).states(lines)
    front_s = time.perf_counter() - t0
    tail = TextTail.from_file(1).eval()
    orders = {
        "file order": np.arange(len(states)),
        "length-sorted": np.argsort([len(s) for s in states], kind="stable"),
    }

    def once(order) -> tuple[float, np.ndarray]:
        out = np.empty((len(states), 384), dtype=np.float32)
        t = time.perf_counter()
        with torch.no_grad():
            for i in range(0, len(order), BATCH):
                take = order[i : i + BATCH]
                out[take] = tail(*pad_states([states[j] for j in take])).numpy()
        return time.perf_counter() - t, out

    runs = {name: [] for name in orders}
    vectors = {}
    for _ in range(args.repeats):
        for name, order in orders.items():
            s, vectors[name] = once(order)
            runs[name].append({"wall_s": round(s, 3), "load_average": round(os.getloadavg()[0], 2)})
    best = {name: min(r["wall_s"] for r in rs) for name, rs in runs.items()}
    a, b = vectors["file order"], vectors["length-sorted"]
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    lengths = [len(s) for s in states]
    record = {
        "benchmark": "the adaptation stage's e5 tail: file order vs length-sorted batches (CPU)",
        "data": {"file": str(path.relative_to(args.data)), "lines": len(lines)},
        "tokens": {"mean": round(float(np.mean(lengths)), 1), "max": int(max(lengths))},
        "batch": BATCH,
        "threads": args.threads,
        "cpu_native_bf16": cpu_has_native_bf16(),
        "front_s": round(front_s, 1),
        "runs": runs,
        "best_s": best,
        "lines_per_s": {name: round(len(lines) / s, 1) for name, s in best.items()},
        "speedup_sorted": round(best["file order"] / best["length-sorted"], 2),
        "agreement": {"min_cosine": float(cos.min()), "max_abs": float(np.abs(a - b).max())},
        "note": "e5's untrained last layer (its cost is the trained one's); best of the alternating runs",
        "provenance": provenance(model=no_model("e5-small's pretrained last layer; no polyvse checkpoint"), tree=tree),
    }
    write_json_atomic(args.out, record)
    print({k: record[k] for k in ("tokens", "best_s", "speedup_sorted", "agreement")})
    return 0


if __name__ == "__main__":
    sys.exit(main())
