"""Seconds per training step of a fine-tuned backbone tail at 1 and 2 threads (what `make model MODEL_THREADS=2`
changes), and with the step under bf16 autocast (``--precisions fp32,bf16``: what `polyvse train --precision bf16`
changes on a CPU).

    python benchmarks/bench_tail_threads.py --out benchmarks/results/tail_threads.json \
        [--backbone efficientnet-lite2:tail1] [--batch 256] [--steps 6] [--threads 1,2] [--precisions fp32]

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

from polyvse.util.atomic import write_json_atomic


def time_steps(backbone: str, batch: int, steps: int, threads: int, precision: str = "fp32") -> float:
    """Mean seconds per step after one warm-up step, in this process at ``threads`` threads, the forward pass
    under bf16 autocast for ``precision`` bf16 (as polyvse.device.autocast runs a training step)."""
    import torch

    from polyvse.device import autocast
    from polyvse.features.backbones import backbone_tail, get_extractor

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    shape = get_extractor(backbone, _random_init=True).map_shape
    tail = backbone_tail(backbone, shape).train()
    x = torch.randn(batch, *shape)
    opt = torch.optim.Adam(tail.parameters(), lr=1e-4)

    def step() -> None:
        opt.zero_grad()
        with autocast(torch.device("cpu"), precision, training=True):
            loss = tail(x).float().pow(2).mean()
        loss.backward()
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
    ap.add_argument("--precisions", default="fp32", help="comma-separated: fp32, bf16 (the step under autocast)")
    ap.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)  # child mode: one thread count
    ap.add_argument("--precision", default="fp32", help=argparse.SUPPRESS)  # child mode: its precision
    args = ap.parse_args(argv)
    if args.one is not None:
        print(
            json.dumps(
                {"seconds_per_step": time_steps(args.backbone, args.batch, args.steps, args.one, args.precision)}
            )
        )
        return {}
    timed = {}  # precision -> threads -> seconds per step
    for precision in args.precisions.split(","):
        per = timed.setdefault(precision, {})
        for n in (int(t) for t in args.threads.split(",")):
            cmd = [
                sys.executable,
                __file__,
                "--out",
                str(args.out),
                "--backbone",
                args.backbone,
                "--batch",
                str(args.batch),
                "--steps",
                str(args.steps),
                "--one",
                str(n),
                "--precision",
                precision,
            ]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
            per[str(n)] = round(json.loads(out)["seconds_per_step"], 3)
            print(f"{precision}, {n} thread(s): {per[str(n)]:.3f} s/step", flush=True)
    per = timed.get("fp32", {})
    base = per.get("1")
    result = {
        "backbone": args.backbone,
        "batch": args.batch,
        "steps": args.steps,
        "seconds_per_step": per,
        "speedup_vs_1_thread": {k: round(base / v, 2) for k, v in per.items()} if base else None,
        **(
            {
                "seconds_per_step_bf16": timed["bf16"],
                "speedup_bf16_vs_fp32": {k: round(per[k] / v, 2) for k, v in timed["bf16"].items() if k in per},
            }
            if "bf16" in timed
            else {}
        ),
        "machine": f"{platform.processor() or platform.machine()}, {platform.system()}",
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    from polyvse.provenance import no_model, provenance

    result["provenance"] = provenance(model=no_model("a backbone tail's training step on random photo maps"))
    write_json_atomic(args.out, result)
    return result


if __name__ == "__main__":
    main()
