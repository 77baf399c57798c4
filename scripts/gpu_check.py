"""Check polyvse's GPU path on a machine with a CUDA GPU and write what was seen to one JSON record.

    python scripts/gpu_check.py --out gpu_check.json [--data-root D] [--languages en] [--device cuda]

The CPU tests fake CUDA (``tests/test_device.py``); this runs the real thing, each stage on its own so that one
failure does not hide the others (the record says which stage failed and why):

* ``features``: EfficientNet-Lite0 features of real photos through ``extract_features`` on the GPU against the
  same photos on the CPU (the cache serves both under one key, so they must agree to float rounding), and the
  backbone run with cuDNN's TF32 default beside them (what the extraction turns off);
* ``train``: the demo model (word-level GRU, Flickr8K's ``--languages``) trained on the GPU for two epochs:
  twice with one seed, and once stopped inside its first epoch then resumed (``train(resume=True)``), each
  compared bit for bit with the first run's checkpoint; and once in bf16 (val mR beside fp32's). A resumed run's
  ``last_loss`` is the mean over the steps after the resume only;
* ``load``: the GPU-trained checkpoint loaded by ``polyvse.load`` on the CPU and on the GPU, the same captions
  and photos embedded on both (cosine);
* ``torchrun``: ``torchrun --standalone --nproc_per_node 1 -m polyvse_app.cli train ... --smoke`` (one rank:
  NCCL's process group, the rank's own GPU, rank 0's data preparation on the run's device).

``--device cpu`` runs the same code on the CPU (a check of this script, not of the GPU path).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]


def log(msg: str) -> None:
    print(f"[gpu_check {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1) + 1e-12)


def check_features(device: torch.device, images: Path, n: int, work: Path) -> dict:
    from polyvse.device import loader_workers
    from polyvse.features import extract_features, get_extractor, load_image

    paths = sorted(images.glob("*.jpg"))[:n]
    out = {"photos": len(paths), "backbone": "efficientnet-lite0"}
    feats = {}
    for dev in (torch.device("cpu"), device):
        ext = get_extractor("efficientnet-lite0").to(dev, "fp32")
        t0 = time.perf_counter()
        # a fresh cache each: both computed, not one read back from the other
        res = extract_features(
            paths, ext, work / f"cache-{dev.type}", batch_size=32, num_workers=loader_workers(dev), progress=False
        )
        feats[dev.type] = res.features
        out[f"{dev.type}_seconds"] = time.perf_counter() - t0
    a, b = feats["cpu"], feats[device.type]
    out["max_abs_diff_to_cpu"] = float(np.abs(a - b).max())
    out["min_cosine_to_cpu"] = float(cosines(a, b).min())
    if device.type == "cuda":  # the same batch with cuDNN's default (TF32 convolutions): what ieee_fp32 avoids
        ext = get_extractor("efficientnet-lite0").to(device, "fp32")
        batch = torch.stack([ext.transform(load_image(p)) for p in paths[:32]]).to(device)
        backends = (torch.backends.cudnn.conv, torch.backends.cuda.matmul)
        saved = [x.fp32_precision for x in backends]
        for x in backends:
            x.fp32_precision = "tf32"
        try:
            with torch.no_grad():
                tf32 = ext._pooled(batch.contiguous(memory_format=torch.channels_last)).float().cpu().numpy()
        finally:
            for x, v in zip(backends, saved):
                x.fp32_precision = v
        out["tf32_max_abs_diff_to_cpu"] = float(np.abs(a[:32] - tf32.reshape(len(tf32), -1)).max())
    log(
        f"features: max |gpu-cpu| {out['max_abs_diff_to_cpu']:.2e}, min cosine {out['min_cosine_to_cpu']:.7f}"
        + (f"; with TF32 {out['tf32_max_abs_diff_to_cpu']:.2e}" if "tf32_max_abs_diff_to_cpu" in out else "")
    )
    return out


def _train(cfg, out_dir: Path, root: Path, device: torch.device, smoke: bool, **kw) -> dict:
    from polyvse_train.train import train

    t0 = time.perf_counter()
    metrics = train(cfg, out_dir, root, progress=False, device=str(device), smoke=smoke, **kw)
    log_file = out_dir / "train_log.jsonl"  # written at each epoch's end: absent when max_steps stopped epoch 1
    log_lines = [json.loads(x) for x in log_file.read_text().splitlines()] if log_file.is_file() else []
    summary = {k: metrics[k] for k in ("device", "precision") if k in metrics}
    summary["seconds"] = time.perf_counter() - t0
    summary["last_loss"] = log_lines[-1]["loss"] if log_lines else None
    summary["steps"] = log_lines[-1]["step"] if log_lines else None
    summary["mean_recall"] = {
        lang: round(m["mr"], 2) if isinstance(m, dict) else m for lang, m in metrics.get("languages", {}).items()
    }
    return summary


def weight_diff(run_a: Path, run_b: Path) -> float:
    """The largest absolute difference between two runs' checkpoint weights (0.0: bit-identical)."""
    from safetensors.torch import load_file

    a, b = (load_file(str(r / "checkpoint" / "model.safetensors")) for r in (run_a, run_b))
    if a.keys() != b.keys():
        raise RuntimeError(f"{run_a} and {run_b} hold different tensors")
    return max(float((a[k].double() - b[k].double()).abs().max()) if a[k].numel() else 0.0 for k in a)


def check_train(device: torch.device, root: Path, languages: list[str], work: Path, smoke: bool) -> dict:
    from polyvse_train.config import TrainConfig

    cfg = TrainConfig(name="gpu-check-demo", epochs=2, languages=languages, eval_split="val")
    out = {
        "config": "TrainConfig defaults (the demo: word-level GRU, cosine, hinge), epochs 2, languages "
        + ",".join(languages)
    }
    out["fp32"] = _train(cfg, work / "fp32", root, device, smoke)
    log(f"train fp32: {out['fp32']}")
    _train(cfg, work / "again", root, device, smoke)
    out["same_seed_rerun_max_abs_weight_diff"] = weight_diff(work / "fp32", work / "again")
    log(f"train again, same seed: max |weight diff| {out['same_seed_rerun_max_abs_weight_diff']:.2e}")
    stop = max(1, out["fp32"]["steps"] // 3)  # inside the first epoch
    _train(cfg, work / "resumed", root, device, smoke, max_steps=stop)
    out["fp32_stopped_at_step_then_resumed"] = stop
    out["fp32_resumed"] = _train(cfg, work / "resumed", root, device, smoke, resume=True)
    out["resumed_max_abs_weight_diff"] = weight_diff(work / "fp32", work / "resumed")
    log(
        f"train resumed: {out['fp32_resumed']}, max |weight diff| to uninterrupted "
        f"{out['resumed_max_abs_weight_diff']:.2e}"
    )
    if device.type == "cuda":
        out["bf16"] = _train(cfg, work / "bf16", root, device, smoke, precision="bf16")
        log(f"train bf16: {out['bf16']}")
    return out


def check_load(device: torch.device, root: Path, checkpoint: Path, lang: str) -> dict:
    import polyvse

    texts = [
        "a dog runs on the beach",
        "two children play in the snow",
        "a man rides a bike down a hill",
        "a woman in a red coat walks past a shop",
        "a brown dog jumps over a fence",
    ]
    photos = sorted((root / "flickr8k" / "images").glob("*.jpg"))[:16]
    vecs = {}
    for dev in ("cpu", str(device)):
        model = polyvse.load(checkpoint, device=dev)
        vecs[dev] = (model.encode_text(texts, lang), model.encode_image([str(p) for p in photos]))
    (t_cpu, i_cpu), (t_dev, i_dev) = vecs["cpu"], vecs[str(device)]
    out = {
        "captions": len(texts),
        "photos": len(photos),
        "text_min_cosine": float(cosines(t_cpu, t_dev).min()),
        "image_min_cosine": float(cosines(i_cpu, i_dev).min()),
    }
    log(f"load: {out}")
    return out


def check_torchrun(device: torch.device, root: Path, languages: list[str], work: Path) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "1",
        "-m",
        "polyvse_app.cli",
        "train",
        "--config",
        str(ROOT / "configs" / "vse.yaml"),
        "--smoke",
        "--quiet",
        "--data-root",
        str(root),
        "--out",
        str(work / "torchrun"),
        "--device",
        device.type,
        "--set",
        f"languages=[{','.join(languages)}]",
        "--dist-timeout",
        "5",
    ]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=os.environ.copy())
    out = {
        "command": " ".join(cmd[1:]),
        "returncode": p.returncode,
        "seconds": time.perf_counter() - t0,
        "output_tail": (p.stdout + p.stderr)[-3000:],
    }
    metrics = work / "torchrun" / "metrics.json"
    if metrics.is_file():
        m = json.loads(metrics.read_text())
        out["metrics_device"] = m.get("device")
        out["processes"] = m.get("processes")
    log(f"torchrun: rc {p.returncode}, {out['seconds']:.0f} s, device {out.get('metrics_device')}")
    if p.returncode != 0:
        said = [line for line in (p.stdout + p.stderr).splitlines() if "error" in line.lower()][:6]
        raise RuntimeError(f"torchrun exited {p.returncode}: " + " | ".join(said))
    return out


def main(argv: list[str] | None = None) -> int:
    from polyvse.device import resolve_device
    from polyvse.util.atomic import write_json_atomic
    from polyvse.util.paths import data_root

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="JSON record to write (rewritten after every stage)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--data-root", help="data root (default: $POLYVSE_DATA, else ~/.cache/polyvse)")
    ap.add_argument("--languages", default="en", help="demo training languages (default %(default)s)")
    ap.add_argument("--photos", type=int, default=256, help="photos for the feature check")
    ap.add_argument("--stages", default="features,train,load,torchrun")
    ap.add_argument("--smoke", action="store_true", help="smoke-sized training (a check of this script)")
    ap.add_argument("--work", type=Path, help="scratch folder (default: a temporary one)")
    args = ap.parse_args(argv)
    device = resolve_device(args.device)
    root = data_root(args.data_root)
    languages = args.languages.split(",")
    record: dict = {
        "command": "python scripts/gpu_check.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d"),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device": str(device),
        "stages": {},
    }
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        record["gpu"] = {
            "name": p.name,
            "memory_gib": round(p.total_memory / 2**30, 1),
            "cuda": torch.version.cuda,
            "capability": f"{p.major}.{p.minor}",
        }
    record["cpu_cores"] = os.cpu_count()
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_gpu import source_commit

    record.update(source_commit())
    from polyvse.provenance import no_model, provenance

    record["provenance"] = provenance(
        record["command"], no_model("checks the GPU paths on demo models trained in a scratch folder (not kept)")
    )
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        os.environ.setdefault("POLYVSE_CACHE", str(work / "polyvse-cache"))
        steps = {
            "features": lambda: check_features(device, root / "flickr8k" / "images", args.photos, work),
            "train": lambda: check_train(device, root, languages, work / "train", args.smoke),
            "load": lambda: check_load(device, root, work / "train" / "fp32" / "checkpoint", languages[0]),
            "torchrun": lambda: check_torchrun(device, root, languages, work),
        }
        for name in args.stages.split(","):
            t0 = time.perf_counter()
            try:
                record["stages"][name] = {"ok": True, **steps[name]()}
            except Exception as e:  # noqa: BLE001 -- a failed stage is a finding; the others still run
                traceback.print_exc()
                record["stages"][name] = {"ok": False, "error": f"{type(e).__name__}: {e}"}
            record["stages"][name]["stage_seconds"] = time.perf_counter() - t0
            write_json_atomic(args.out, record)
    print(json.dumps(record, indent=2, default=str))
    return 0 if all(s["ok"] for s in record["stages"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
