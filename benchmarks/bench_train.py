"""Training throughput: the real training loop versus a bare PyTorch loop on random tensors (the kernel bound).

real  = captions/s of `polyvse_train.train.train` (its per-epoch `items / loop_seconds`: sampling, padding,
        forward, backward, optimiser step) on F8K-ML with the demo model;
bound = captions/s of the same modules (same model, loss, optimiser, batches: the real batches' own word ids,
        padded in advance) with nothing else in the loop.
train_throughput_ratio = real / bound (target >= 0.9: data handling must not be the bottleneck). The bound is
measured before and after the real run and the faster of the two is taken. (Random word ids, used until
2026-11-26, made the bare loop slower than the real one: ratio 1.07, so it was no bound. Whether the bare loop is
a bound now is not settled: README, section Performance.)

The same for a MULE config (`--mule-config`, default configs/mule-nc-lc.yaml: LSTM over MULE's per-language
universal projection, top-K matching + neighbourhood constraints + adversarial language classifier, batches
of photo tuples with 2 en / 2 de / 1 fr / 1 cs / 2 zh captions): the bound calls the objective's own MULE
loss on the real batches' own word ids and languages, the faster of before/after -> mule_throughput_ratio. (Random
ids and the mean of the two, used until 2026-11-26, gave 1.22: no bound either.)

    python benchmarks/bench_train.py --out benchmarks/results/train.json [--epochs 2] [--quick] [--no-mule]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch


def optimise(cfg, model, optimiser, loss) -> None:
    """One optimiser step as the training loop takes it (zero, backward, clip, step)."""
    optimiser.zero_grad(set_to_none=True)
    loss.backward()
    if cfg.get("grad_clip") > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.get("grad_clip"))
    optimiser.step()


def padded_ids(data, rows) -> tuple[torch.Tensor, torch.Tensor]:
    """The training captions ``rows``' own word ids, zero-padded, and their lengths: what the real loop feeds the
    text encoder (the same ids, not random ones: the embedding's backward and the GRU's work depend on them)."""
    lengths = torch.tensor([len(data.train.ids[int(i)]) for i in rows])
    ids = torch.zeros(len(rows), int(lengths.max()), dtype=torch.long)
    for row, i in enumerate(rows):
        ids[row, :lengths[row]] = torch.as_tensor(data.train.ids[int(i)], dtype=torch.long)
    return ids, lengths


def bound_captions_per_s(cfg, data, batches, repeats: int = 1, device=None, precision: str = "fp32") -> float:
    """The same modules on the real batches' word ids, padded in advance (random photo features: the image head's
    cost does not depend on them): no sampler, no padding, no Python batching in the loop.
    On a GPU the tensors are there before the clock starts and the clock stops after a synchronize."""
    from polyvse.device import autocast
    from polyvse.losses import HingeRankingLoss
    from polyvse_train.train import build_model, seed_everything

    device = device or torch.device("cpu")
    seed_everything(cfg.get("seed"))
    model = build_model(cfg, data).to(device).train()
    optimiser = torch.optim.Adam(model.parameters(), lr=cfg.get("lr"))
    loss_fn = HingeRankingLoss(margin=cfg.get("margin"), max_violation=cfg.get("max_violation"))
    gen = torch.Generator().manual_seed(0)
    steps = []
    for idx in batches:  # pre-built: the real batches' own word ids, padded before the clock starts
        ids, lengths = padded_ids(data, idx)
        feats = torch.randn(len(idx), data.features.shape[1], generator=gen)
        steps.append((feats.to(device), ids.to(device), lengths))
    n, start = 0, None
    for r in range(repeats):
        for i, (feats, ids, lengths) in enumerate(steps):
            if r == 0 and i == 1:  # the first step (allocations, lazy init) is a warm-up, not timed
                n, start = 0, time.perf_counter()
            with autocast(device, precision):
                image_emb, text_emb = model(feats, ids, lengths)
                loss = loss_fn(model.scores(image_emb, text_emb))
            optimise(cfg, model, optimiser, loss)
            n += len(lengths)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return n / (time.perf_counter() - start)


def mule_bound_captions_per_s(cfg, data, root, batches, epoch: int) -> float:
    """MULE's matching-phase step (the objective's own loss code) on the real batches' own word ids, padded before
    the clock starts."""
    from polyvse_train.objectives import build_objective
    from polyvse_train.objectives.tuples import EncodedSlots
    from polyvse_train.train import build_model, build_optimiser, seed_everything

    seed_everything(cfg.get("seed"))
    model = build_model(cfg, data).train()
    objective = build_objective(cfg, model, data, root)
    optimiser = build_optimiser(cfg, model, list(objective.parameters()))
    steps = []
    for photo_rows, slots in batches:
        valid = slots >= 0
        flat = slots[valid]
        ids, lengths = padded_ids(data, flat)
        steps.append((photo_rows, valid, ids, lengths, [data.train.langs[int(c)] for c in flat]))
    n, start = 0, None
    for i, (photo_rows, valid, ids, lengths, langs) in enumerate(steps):
        if i == 1:  # the first step is a warm-up, not timed
            n, start = 0, time.perf_counter()
        text, words = model.text_features(ids, lengths, langs)
        loss, _ = objective.tuple_loss(photo_rows, EncodedSlots(valid, text, words, lengths, langs), epoch)
        optimise(cfg, model, optimiser, loss)
        n += len(lengths)
    return n / (time.perf_counter() - start)


def measure_mule(config_path: str, root, epochs: int, quick: bool) -> dict:
    from polyvse_train.config import TrainConfig
    from polyvse_train.objectives import build_objective
    from polyvse_train.data import prepare_data
    from polyvse_train.train import build_model, train

    cfg = TrainConfig.load(config_path)
    over = dict(epochs=epochs, lp_epochs=0)  # the matching phase is what a MULE run spends its time in
    if quick:
        over.update(embed_dim=64, hidden_dim=64, word_dim=32, universal_dim=32, image_hidden_dim=64, smoke_photos=48,
                    smoke_epochs=2, batch_size=16)
    for name, value in over.items():
        cfg.set(name, value)
    cfg.validate(config_path)
    torch.set_num_threads(cfg.get("threads"))
    data = prepare_data(cfg, root, smoke=quick, progress=False)
    batches = build_objective(cfg, build_model(cfg, data), data, root).sampler().epoch_batches(1)
    before = mule_bound_captions_per_s(cfg, data, root, batches, epoch=epochs - 1)
    with tempfile.TemporaryDirectory() as tmp:
        train(cfg, tmp, root, smoke=quick, progress=False, device="cpu")  # its bound runs on the CPU
        last = [json.loads(x) for x in (Path(tmp) / "train_log.jsonl").read_text().splitlines()][-1]
    real = last["items"] / last["loop_seconds"]
    after = mule_bound_captions_per_s(cfg, data, root, batches, epoch=epochs - 1)
    bound = max(before, after)  # the fastest the bare loop ran, as for the demo model
    return {"mule_throughput_ratio": real / bound, "mule_real_captions_per_s": real,
            "mule_bound_captions_per_s": bound, "mule_bound_before_after": [before, after],
            "mule_config": f"{config_path}" + (" quick/tiny" if quick else ""),
            "mule_batch_photos": cfg.get("batch_size"),
            "mule_items": last["items"]}


def measure_demo(root, epochs: int, quick: bool, device=None, precision: str = "fp32",
                 languages: list[str] | None = None) -> dict:
    """The demo model's real loop against its bare-kernel bound on ``device`` -> train_throughput_ratio etc.
    ``languages``: the demo's training languages (default: the config's)."""
    from polyvse.sampling import DistinctPhotoBatchSampler
    from polyvse_train.config import TrainConfig
    from polyvse_train.data import prepare_data
    from polyvse_train.train import train

    device = device or torch.device("cpu")
    langs = {"languages": list(languages)} if languages else {}
    cfg = TrainConfig(name="bench-train", epochs=epochs, **langs)
    if quick:
        cfg = TrainConfig(name="bench-train", embed_dim=64, word_dim=32, hidden_dim=64, smoke_photos=48,
                          smoke_epochs=2, batch_size=32, **langs)
    torch.set_num_threads(cfg.get("threads"))
    data = prepare_data(cfg, root, smoke=quick, progress=False)
    batches = DistinctPhotoBatchSampler(data.train.photo_row, cfg.get("batch_size"),
                                        seed=cfg.get("seed")).epoch_batches(1)

    bound_before = bound_captions_per_s(cfg, data, batches, device=device, precision=precision)
    with tempfile.TemporaryDirectory() as tmp:
        train(cfg, tmp, root, smoke=quick, progress=False, device=str(device), precision=precision)
        log = [json.loads(line) for line in (Path(tmp) / "train_log.jsonl").read_text().splitlines()]
    last = log[-1]
    real = last["items"] / last["loop_seconds"]
    bound_after = bound_captions_per_s(cfg, data, batches, device=device, precision=precision)
    bound = max(bound_before, bound_after)  # the fastest the bare loop ran: a ratio above 1 would mean no bound
    return {
        "train_throughput_ratio": real / bound,
        "train_real_captions_per_s": real,
        "train_bound_captions_per_s": bound,
        "train_bound_before_after": [bound_before, bound_after],
        "train_model": "demo (shared GRU, cosine, hinge)" + (" quick/tiny" if quick else ""),
        "train_batch_size": cfg.get("batch_size"), "train_threads": cfg.get("threads"),
        "train_epoch_measured": last["epoch"], "train_items": last["items"],
        "train_device": str(device), "train_precision": precision,
    }


def main(argv: list[str] | None = None) -> int:
    from polyvse.atomic import write_json_atomic
    from polyvse.paths import data_root

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="JSON file to write")
    p.add_argument("--data-root", help="data root (default: $POLYVSE_DATA, else ~/.cache/polyvse)")
    p.add_argument("--epochs", type=int, default=2, help="real epochs; the last one is measured")
    p.add_argument("--quick", action="store_true", help="tiny model on a slice (seconds; for the smoke test)")
    p.add_argument("--mule-config", default=str(Path(__file__).resolve().parents[1] / "configs" / "mule-nc-lc.yaml"),
                   help="MULE config measured the same way (default: %(default)s)")
    p.add_argument("--no-mule", action="store_true", help="measure the demo model only")
    args = p.parse_args(argv)

    root = data_root(args.data_root)
    # CPU, as always: the GPU figures are bench_gpu.py's
    result = measure_demo(root, args.epochs, args.quick, torch.device("cpu"))
    if not args.no_mule:
        result.update(measure_mule(args.mule_config, root, args.epochs, args.quick))
    write_json_atomic(args.out, result)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
