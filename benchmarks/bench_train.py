"""Training throughput: the real training loop versus a bare PyTorch loop on random tensors (the kernel bound).

real  = captions/s of `polyvse_train.train.train` (its per-epoch `items / loop_seconds`: sampling, padding,
        forward, backward, optimiser step) on F8K-ML with the demo model;
bound = captions/s of the same modules (same model, loss, optimiser, batch shapes and caption lengths) on
        pre-generated random tensors, with nothing else in the loop.
train_throughput_ratio = real / bound (target >= 0.9: data handling must not be the bottleneck). The bound is
measured before and after the real run and averaged, so machine noise hits both sides alike.

    python benchmarks/bench_train.py --out benchmarks/results/train.json [--epochs 2] [--quick]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch


def bound_captions_per_s(cfg, data, batches, repeats: int = 1) -> float:
    """The same modules on random tensors of the real shapes: no sampler, no padding, no Python batching."""
    from polyvse.losses import HingeRankingLoss
    from polyvse_train.train import build_model, seed_everything

    seed_everything(cfg.seed)
    model = build_model(cfg, data).train()
    optimiser = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    loss_fn = HingeRankingLoss(margin=cfg.margin, max_violation=cfg.max_violation)
    gen = torch.Generator().manual_seed(0)
    vocab = len(data.captions.vocab)
    steps = []
    for idx in batches:  # pre-generate: shapes and lengths of the real batches, random content
        lengths = torch.tensor([len(data.train.ids[i]) for i in idx])
        ids = torch.randint(2, vocab, (len(idx), int(lengths.max())), generator=gen)
        ids[torch.arange(ids.shape[1])[None, :] >= lengths[:, None]] = 0
        feats = torch.randn(len(idx), data.features.shape[1], generator=gen)
        steps.append((feats, ids, lengths))
    n = 0
    start = time.perf_counter()
    for _ in range(repeats):
        for feats, ids, lengths in steps:
            image_emb, text_emb = model(feats, ids, lengths)
            loss = loss_fn(model.scores(image_emb, text_emb))
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            optimiser.step()
            n += len(lengths)
    return n / (time.perf_counter() - start)


def main(argv: list[str] | None = None) -> int:
    from polyvse.atomic import write_json_atomic
    from polyvse.paths import data_root
    from polyvse.sampling import DistinctPhotoBatchSampler
    from polyvse_train.config import TrainConfig
    from polyvse_train.train import prepare_data, train

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="JSON file to write")
    p.add_argument("--data-root", help="data root (default: $POLYVSE_DATA, else ~/.cache/polyvse)")
    p.add_argument("--epochs", type=int, default=2, help="real epochs; the last one is measured")
    p.add_argument("--quick", action="store_true", help="tiny model on a slice (seconds; for the smoke test)")
    args = p.parse_args(argv)

    root = data_root(args.data_root)
    cfg = TrainConfig(name="bench-train", epochs=args.epochs)
    smoke = args.quick
    if smoke:
        cfg = TrainConfig(name="bench-train", embed_dim=64, word_dim=32, hidden_dim=64, smoke_photos=48,
                          smoke_epochs=2, batch_size=32)
    torch.set_num_threads(cfg.threads)
    data = prepare_data(cfg, root, smoke=smoke, progress=False)
    batches = DistinctPhotoBatchSampler(data.train.photo_row, cfg.batch_size, seed=cfg.seed).epoch_batches(1)

    bound_before = bound_captions_per_s(cfg, data, batches)
    with tempfile.TemporaryDirectory() as tmp:
        train(cfg, tmp, root, smoke=smoke, progress=False)
        log = [json.loads(line) for line in (Path(tmp) / "train_log.jsonl").read_text().splitlines()]
    last = log[-1]
    real = last["items"] / last["loop_seconds"]
    bound_after = bound_captions_per_s(cfg, data, batches)
    bound = (bound_before + bound_after) / 2
    result = {
        "train_throughput_ratio": real / bound,
        "train_real_captions_per_s": real,
        "train_bound_captions_per_s": bound,
        "train_bound_before_after": [bound_before, bound_after],
        "train_model": "demo (shared GRU, cosine, hinge)" + (" quick/tiny" if smoke else ""),
        "train_batch_size": cfg.batch_size, "train_threads": cfg.threads,
        "train_epoch_measured": last["epoch"], "train_items": last["items"],
        "mule": "not measured yet: the MULE objective's loop has no bare-loop counterpart here",
    }
    write_json_atomic(args.out, result)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
