"""`polyvse demo`: the main job: F8K-ML -> features (cached) -> shared-GRU model -> checkpoint -> evaluation."""
from __future__ import annotations

from pathlib import Path

from .train import add_common, apply_overrides, run_training


def register(sub) -> None:
    p = sub.add_parser("demo", help="train and evaluate the demo model on F8K-ML (en, de, fr, cs, zh)")
    p.add_argument("--out", default="runs/demo", help="output folder (default runs/demo)")
    add_common(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from polyvse_train.config import TrainConfig

    return run_training(apply_overrides(TrainConfig(name="demo"), args), args, Path(args.out))
