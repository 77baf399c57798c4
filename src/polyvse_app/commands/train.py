"""`polyvse train --config FILE [--out DIR] [--resume] [--smoke]`."""

from __future__ import annotations

import argparse
from pathlib import Path

from polyvse.util.paths import data_root

from .shared import add_device_args


def add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-root", help="data root (default: $POLYVSE_DATA, else ~/.cache/polyvse)")
    p.add_argument("--resume", action="store_true", help="continue from the training state in --out")
    p.add_argument(
        "--smoke",
        action="store_true",
        help="a few steps on a slice of the data (tests); configs/overlays/smoke.yaml says how few",
    )
    p.add_argument("--seed", type=int, help="override the config's seed")
    p.add_argument("--split", help="override the config's split: official or fold<i>of<k>")
    p.add_argument("--epochs", type=int, help="override the config's number of epochs")
    p.add_argument("--eval-split", dest="eval_split", help="override the config's eval_split: val or test")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override any config field, by flat name (embed_dim) or path (model.embed_dim); VALUE is "
        "YAML: 10, true, [en, de], {en: 2}; repeatable",
    )
    p.add_argument("--save-every", type=int, default=0, help="also save the training state every N steps")
    p.add_argument("--max-steps", type=int, help="stop after N steps, keeping the state (for tests)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument(
        "--dist-timeout",
        type=float,
        metavar="MIN",
        help="under torchrun, minutes a rank waits for the others at a collective before the run fails "
        "(default: $POLYVSE_DIST_TIMEOUT, else 60; rank 0 preparing data from empty caches takes "
        "long)",
    )
    add_device_args(p, precision=True)


def apply_overrides(cfg, args):
    """cfg with the --seed/--split/--epochs/--eval-split options and the --set assignments applied, checked."""
    import yaml

    from polyvse.errors import DataError

    changes = {
        name: getattr(args, name)
        for name in ("seed", "split", "epochs", "eval_split")
        if getattr(args, name, None) is not None
    }
    for item in getattr(args, "overrides", None) or []:
        field, sep, value = item.partition("=")
        if not sep or not field.strip():
            raise DataError(f"--set {item!r}: write FIELD=VALUE, e.g. --set top_k=10")
        changes[field.strip()] = yaml.safe_load(value)
    return cfg.with_overrides(changes, source="--set") if changes else cfg


def run_training(cfg, args, out: Path) -> int:
    from polyvse_train.train import train

    metrics = train(
        cfg,
        out,
        data_root(args.data_root),
        resume=args.resume,
        smoke=args.smoke,
        save_every=args.save_every,
        progress=not args.quiet,
        max_steps=args.max_steps,
        device=args.device,
        precision=args.precision,
        dist_timeout_min=args.dist_timeout,
    )
    if "languages" in metrics:
        print_metrics(metrics, out)
    elif "stopped_at_step" in metrics:
        print(f"stopped at step {metrics['stopped_at_step']}; continue with --resume")
    return 0


def print_metrics(metrics: dict, out: Path) -> None:
    from polyvse.evaluation.report import markdown_table

    took = f"{metrics['wall_time_s']} s"
    if "cpu_time_s" in metrics:
        took += f" wall, {metrics['cpu_time_s']} s CPU"
        if metrics["processes"] > 1:  # a resumed run
            took += f" over {metrics['processes']} processes" + (
                "" if metrics["time_complete"] else " (the earlier ones' time not recorded)"
            )
    print(f"\n{metrics['dataset']} · split {metrics['split']} · seed {metrics['seed']} · {took}\n")
    print(markdown_table(metrics["languages"]))
    print(f"\ncheckpoint: {out / 'checkpoint'}\nmetrics:    {out / 'metrics.json'}")


def register(sub) -> None:
    p = sub.add_parser("train", help="train a model from a config file")
    p.add_argument(
        "--config",
        help="a packaged config's name (mule-full, f8k-full/polyvse-best: --list-configs) or "
        "the path of a YAML/JSON config",
    )
    p.add_argument("--list-configs", action="store_true", help="list the packaged configs and exit")
    p.add_argument("--out", help="output folder (default runs/<config name>)")
    add_common(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from polyvse_train.config import TrainConfig

    if args.list_configs:
        from polyvse_train.config.packaged import list_configs

        print(list_configs())
        return 0
    if not args.config:
        from polyvse.errors import DataError

        raise DataError("give --config NAME or FILE (`polyvse train --list-configs` lists the packaged configs)")
    cfg = apply_overrides(TrainConfig.load(args.config), args)
    out = Path(args.out or f"runs/{cfg.name}")
    return run_training(cfg, args, out)
