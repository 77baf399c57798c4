"""Training throughput: the real training step versus a bare PyTorch step on the same batches (the kernel bound).

real  = captions/s of the training loop's own step (`polyvse_train.train.train_step` on a run built by
        `setup_run`: the objective's batch assembly -- photo rows, caption padding --, forward, backward, clip,
        optimiser step) on F8K-ML with the demo model;
bound = captions/s of the same modules (same model, loss, optimiser, batches: the real batches' own word ids,
        padded in advance) with nothing else in the loop.
train_throughput_ratio = real / bound (target >= 0.9: data handling must not be the bottleneck), clipped to 1 as the
exact scan's fraction is (bench_search.bound_fraction: the real step is the bare one plus more work, so a raw ratio
above 1 is timing noise; it is kept as *_raw and flagged, *_exceeds_bound, above 1.03). The two are timed
side by side: alternating blocks of up to BLOCK steps over one epoch's batches, the order swapped every block, so both
see the same machine load and warmth. (A bound timed before and after a whole real run fails: with the
load changing between them the "bound" came out slower than the real loop, ratio 1.18 once, so it was no bound.)
The whole real epoch (`train_one_epoch`: the same steps plus the epoch's sampling and state save) is reported
beside it, train_real_epoch_captions_per_s, for the loop's overhead outside the steps.

The same for a MULE config (`--mule-config`, default configs/mule-nc-lc.yaml: LSTM over MULE's per-language
universal projection, top-K matching + neighbourhood constraints + adversarial language classifier, batches
of photo tuples with 2 en / 2 de / 1 fr / 1 cs / 2 zh captions): the bound calls the objective's own MULE
loss on the real batches' own word ids and languages -> mule_throughput_ratio.

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
from bench_search import bound_fraction  # a ratio to a bound: clipped to 1, the raw one kept, noise above 3% flagged


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
        ids[row, : lengths[row]] = torch.as_tensor(data.train.ids[int(i)], dtype=torch.long)
    return ids, lengths


BLOCK = 10  # steps a timed block: long enough to time, short enough that a change of load hits both kinds alike


def interleaved_rates(real_step, bare_step, sizes, block: int = BLOCK, sync=None) -> tuple[float, float]:
    """Items/s of ``real_step(i)`` and ``bare_step(i)`` over the same steps i (``sizes[i]`` items each), timed in
    alternating blocks of ``block`` steps with the order swapped every block. Step 0 of each is a warm-up
    (allocations, lazy init), not timed. ``sync`` runs before each clock read (a CUDA synchronize on a GPU). An
    epoch of few steps (MULE's: 5 batches) gets shorter blocks, down to one step, so that each order runs at least
    twice."""
    if len(sizes) < 2:
        raise ValueError(f"{len(sizes)} steps: at least 2 are needed (the first is a warm-up)")
    block = max(1, min(block, (len(sizes) - 1) // 4))
    sync = sync or (lambda: None)
    steps = {"real": real_step, "bare": bare_step}
    for step in steps.values():
        step(0)
    spent, items = {"real": 0.0, "bare": 0.0}, {"real": 0, "bare": 0}
    for k, first in enumerate(range(1, len(sizes), block)):
        rows = range(first, min(first + block, len(sizes)))
        for kind in ("bare", "real") if k % 2 == 0 else ("real", "bare"):
            sync()
            start = time.perf_counter()
            for i in rows:
                steps[kind](i)
            sync()
            spent[kind] += time.perf_counter() - start
            items[kind] += sum(int(sizes[i]) for i in rows)
    return items["real"] / spent["real"], items["bare"] / spent["bare"]


def bare_vse_step(cfg, data, batches, device, precision: str = "fp32"):
    """The bound's step i: the same modules on batch i's own word ids, padded before the clock starts, and random
    photo features (the image head's cost does not depend on them): no sampler, no padding, no Python batching.
    On a GPU the tensors are there beforehand."""
    from polyvse.device import autocast
    from polyvse.losses import HingeRankingLoss
    from polyvse_train.train import build_model, seed_everything

    seed_everything(cfg.get("seed"))
    model = build_model(cfg, data).to(device).train()
    optimiser = torch.optim.Adam(model.parameters(), lr=cfg.get("lr"))
    loss_fn = HingeRankingLoss(margin=cfg.get("margin"), max_violation=cfg.get("max_violation"))
    gen = torch.Generator().manual_seed(0)
    tensors = []
    for idx in batches:
        ids, lengths = padded_ids(data, idx)
        feats = torch.randn(len(idx), data.features.shape[1], generator=gen)
        tensors.append((feats.to(device), ids.to(device), lengths))

    def step(i: int) -> None:
        feats, ids, lengths = tensors[i]
        with autocast(device, precision):
            image_emb, text_emb = model(feats, ids, lengths)
            loss = loss_fn(model.scores(image_emb, text_emb))
        optimise(cfg, model, optimiser, loss)

    return step


def bare_mule_step(cfg, data, root, batches, epoch: int):
    """MULE's bound step i: the matching phase's loss (the objective's own code) on batch i's own word ids and
    languages, padded before the clock starts."""
    from polyvse_train.objectives import build_objective
    from polyvse_train.objectives.tuples import EncodedSlots
    from polyvse_train.train import build_model, build_optimiser, seed_everything

    seed_everything(cfg.get("seed"))
    model = build_model(cfg, data).train()
    objective = build_objective(cfg, model, data, root)
    optimiser = build_optimiser(cfg, model, list(objective.parameters()))
    tensors = []
    for batch in batches:
        photo_rows, slots = batch[0], batch[1]
        valid = slots >= 0
        flat = slots[valid]
        ids, lengths = padded_ids(data, flat)
        tensors.append((photo_rows, valid, ids, lengths, [data.train.langs[int(c)] for c in flat]))

    def step(i: int) -> None:
        photo_rows, valid, ids, lengths, langs = tensors[i]
        text, words = model.text_features(ids, lengths, langs)
        loss, _ = objective.tuple_loss(photo_rows, EncodedSlots(valid, text, words, lengths, langs), epoch)
        optimise(cfg, model, optimiser, loss)

    return step


def side_by_side(cfg, root, quick: bool, device, precision: str, bare_of) -> dict:
    """A real run (``setup_run``), its first ``epochs - 1`` epochs trained as warm-up; then its next epoch's
    batches timed step by step against ``bare_of(run.data, batches, run.epoch)``'s steps, interleaved; then that
    epoch trained whole by ``train_one_epoch`` (the trainer's own loop, sampling and state save included)."""
    from polyvse.distributed import DistInfo
    from polyvse_train.train import batch_items, setup_run, train_one_epoch, train_step

    with tempfile.TemporaryDirectory() as tmp:
        run = setup_run(
            cfg, Path(tmp), root, DistInfo(), smoke=quick, progress=False, device=device, precision=precision
        )
        while run.epoch < run.epochs - 1:
            train_one_epoch(run)
        batches = run.sampler.epoch_batches(run.epoch)
        bare = bare_of(run.data, batches, run.epoch)
        sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else None
        real, bound = interleaved_rates(
            lambda i: train_step(run, batches[i]), bare, [batch_items(b) for b in batches], sync=sync
        )
        train_one_epoch(run)
        last = json.loads((Path(tmp) / "train_log.jsonl").read_text().splitlines()[-1])
    return {
        "real": real,
        "bound": bound,
        "epoch_rate": last["items"] / last["loop_seconds"],
        "epoch": last["epoch"],
        "items": last["items"],
        "steps_timed": len(batches) - 1,
    }


def measure_mule(config_path: str, root, epochs: int, quick: bool) -> dict:
    from polyvse_train.config import TrainConfig

    cfg = TrainConfig.load(config_path)
    over = dict(epochs=epochs, lp_epochs=0)  # the matching phase is what a MULE run spends its time in
    if quick:
        over.update(
            embed_dim=64,
            hidden_dim=64,
            word_dim=32,
            universal_dim=32,
            image_hidden_dim=64,
            smoke_photos=48,
            smoke_epochs=2,
            batch_size=16,
        )
    for name, value in over.items():
        cfg.set(name, value)
    cfg.validate(config_path)
    torch.set_num_threads(cfg.get("threads"))
    r = side_by_side(
        cfg,
        root,
        quick,
        torch.device("cpu"),
        "fp32",  # its bound runs on the CPU
        lambda data, batches, epoch: bare_mule_step(cfg, data, root, batches, epoch),
    )
    ratio = bound_fraction(r["real"], r["bound"])
    return {
        "mule_throughput_ratio": ratio["fraction"],
        "mule_throughput_ratio_raw": ratio["raw"],
        "mule_exceeds_bound": ratio["exceeds_bound"],
        "mule_real_captions_per_s": r["real"],
        "mule_bound_captions_per_s": r["bound"],
        "mule_real_epoch_captions_per_s": r["epoch_rate"],
        "mule_config": f"{config_path}" + (" quick/tiny" if quick else ""),
        "mule_batch_photos": cfg.get("batch_size"),
        "mule_items": r["items"],
        "mule_steps_timed": r["steps_timed"],
    }


def measure_demo(
    root, epochs: int, quick: bool, device=None, precision: str = "fp32", languages: list[str] | None = None
) -> dict:
    """The demo model's real training step against its bare-kernel bound on ``device``, side by side ->
    train_throughput_ratio etc. ``languages``: the demo's training languages (default: the config's)."""
    from polyvse_train.config import TrainConfig

    device = device or torch.device("cpu")
    langs = {"languages": list(languages)} if languages else {}
    cfg = TrainConfig(name="bench-train", epochs=epochs, **langs)
    if quick:
        cfg = TrainConfig(
            name="bench-train",
            embed_dim=64,
            word_dim=32,
            hidden_dim=64,
            smoke_photos=48,
            smoke_epochs=2,
            batch_size=32,
            **langs,
        )
    cfg.validate()
    torch.set_num_threads(cfg.get("threads"))
    r = side_by_side(
        cfg,
        root,
        quick,
        device,
        precision,
        lambda data, batches, epoch: bare_vse_step(cfg, data, batches, device, precision),
    )
    ratio = bound_fraction(r["real"], r["bound"])
    return {
        "train_throughput_ratio": ratio["fraction"],
        "train_throughput_ratio_raw": ratio["raw"],
        "train_exceeds_bound": ratio["exceeds_bound"],
        "train_real_captions_per_s": r["real"],
        "train_bound_captions_per_s": r["bound"],
        "train_real_epoch_captions_per_s": r["epoch_rate"],
        "train_timing": f"real and bound steps interleaved in blocks of up to {BLOCK} over one epoch's batches",
        "train_model": "demo (shared GRU, cosine, hinge)" + (" quick/tiny" if quick else ""),
        "train_batch_size": cfg.get("batch_size"),
        "train_threads": cfg.get("threads"),
        "train_epoch_measured": r["epoch"],
        "train_items": r["items"],
        "train_steps_timed": r["steps_timed"],
        "train_device": str(device),
        "train_precision": precision,
    }


def main(argv: list[str] | None = None) -> int:
    from polyvse.util.atomic import write_json_atomic
    from polyvse.util.paths import data_root

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="JSON file to write")
    p.add_argument("--data-root", help="data root (default: $POLYVSE_DATA, else ~/.cache/polyvse)")
    p.add_argument("--epochs", type=int, default=2, help="real epochs; the last one is measured")
    p.add_argument("--quick", action="store_true", help="tiny model on a slice (seconds; for the smoke test)")
    p.add_argument(
        "--mule-config",
        default=str(Path(__file__).resolve().parents[1] / "configs" / "mule-nc-lc.yaml"),
        help="MULE config measured the same way (default: %(default)s)",
    )
    p.add_argument("--no-mule", action="store_true", help="measure the demo model only")
    args = p.parse_args(argv)

    root = data_root(args.data_root)
    # CPU, as always: the GPU figures are bench_gpu.py's
    result = measure_demo(root, args.epochs, args.quick, torch.device("cpu"))
    if not args.no_mule:
        result.update(measure_mule(args.mule_config, root, args.epochs, args.quick))
    from polyvse.provenance import no_model, provenance

    result["provenance"] = provenance(model=no_model("demo and MULE models trained from scratch for timing (not kept)"))
    write_json_atomic(args.out, result)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
