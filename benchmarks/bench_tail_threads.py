"""Seconds per training step of a fine-tuned backbone tail at 1 and 2 threads (what `make model MODEL_THREADS=2`
changes).

    python benchmarks/bench_tail_threads.py --out benchmarks/results/tail_threads.json \
        [--backbone efficientnet-lite2:tail1] [--batch 256] [--steps 6] [--threads 1,2]

polyvse-best's training time is mostly its trainable tail (EfficientNet-Lite2's last MBConv block + head conv)
run forward and backward on a batch of cached activation maps; this times that step alone (forward, a loss,
backward, Adam) on random maps of the real shape, in a fresh process per thread count (torch fixes its thread
pool per process). Run it on a quiet machine: other processes on the cores distort it. Not a test.
"""
from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

from polyvse.atomic import write_json_atomic


def time_steps(backbone: str, batch: int, steps: int, threads: int) -> float:
    """Mean seconds per step after one warm-up step, in this process at ``threads`` threads."""
    import torch

    from polyvse.features.backbones import backbone_tail, get_extractor

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    shape = get_extractor(backbone, _random_init=True).map_shape
    tail = backbone_tail(backbone, shape).train()
    x = torch.randn(batch, *shape)
    opt = torch.optim.Adam(tail.parameters(), lr=1e-4)

    def step() -> None:
        opt.zero_grad()
        tail(x).float().pow(2).mean().backward()
        opt.step()

    step()
    t = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - t) / steps


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path, help="JSON file to write the timings to")
    ap.add_argument("--backbone", default="efficientnet-lite2:tail1")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    ap.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)  # child mode: one thread count
    args = ap.parse_args(argv)
    if args.one is not None:
        print(json.dumps({"seconds_per_step": time_steps(args.backbone, args.batch, args.steps, args.one)}))
        return {}
    per = {}
    for n in (int(t) for t in args.threads.split(",")):
        cmd = [sys.executable, __file__, "--out", str(args.out), "--backbone", args.backbone, "--batch",
               str(args.batch), "--steps", str(args.steps), "--one", str(n)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
        per[str(n)] = round(json.loads(out)["seconds_per_step"], 3)
        print(f"{n} thread(s): {per[str(n)]:.3f} s/step", flush=True)
    base = per.get("1")
    result = {"backbone": args.backbone, "batch": args.batch, "steps": args.steps, "seconds_per_step": per,
              "speedup_vs_1_thread": {k: round(base / v, 2) for k, v in per.items()} if base else None,
              "machine": f"{platform.processor() or platform.machine()}, {platform.system()}",
              "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    write_json_atomic(args.out, result)
    return result


if __name__ == "__main__":
    main()
