"""`polyvse model build`: the product model in one command, resumably.

    polyvse model build --out runs/model [--config f8k-full/polyvse-best] [--plan product] [--threads 2]

Three stages, each skipped when an earlier run finished it:

1. train: the config (a packaged config's name or a file; default the product recipe) into ``<out>``, as
   ``polyvse train --config C --out OUT --resume`` does. A finished model of another config is moved aside to
   ``<out>.stale-<time>`` (kept), never mixed into the new run; a stopped one resumes.
2. index: every photo of ``--images`` (default ``<data root>/flickr8k-224/images``) embedded by the trained
   checkpoint into ``<out>/index``, as ``polyvse index build`` does (the feature cache makes a stopped build
   resume); kept while it holds the same photos and accepts the trained checkpoint.
3. adapt: the languages of the adaptation plan taught into one checkpoint (``polyvse.adaptation.plan``), which
   becomes ``<out>/checkpoint`` once the index accepts it; the trained one is kept as ``<out>/trained-checkpoint``.

Each stage prints its start and its seconds. The build record ``<out>/build.json`` is written atomically after
every stage: the machine (whether it computes bf16 natively), the precision asked and used, the threads, each
stage's seconds (those of the run that did it) and the fingerprints of the trained checkpoint, of the model and of
the index.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path

from .shared import add_device_args

PRODUCT_CONFIG, PRODUCT_PLAN = "f8k-full/polyvse-best", "product"
RECORD = "build.json"


def register(sub) -> None:
    p = sub.add_parser("model", help="build the product model: train, index the photos, teach the plan's languages")
    actions = p.add_subparsers(dest="model_command", required=True)
    b = actions.add_parser(
        "build",
        help="train, index and adapt the product model in one resumable command",
        description="Train the config, index the photos with the trained checkpoint and teach the adaptation "
        "plan's languages into one checkpoint that the index accepts; a stage an earlier run finished is skipped. "
        f"Writes <out>/{RECORD}: the machine, precision, threads, each stage's seconds and the fingerprints.",
    )
    b.add_argument("--out", default="runs/model", metavar="DIR", help="the model folder (default: %(default)s)")
    b.add_argument(
        "--config",
        default=PRODUCT_CONFIG,
        metavar="NAME|FILE",
        help="training config: a packaged config's name (`polyvse train --list-configs`) or a file "
        "(default: %(default)s, the product recipe)",
    )
    b.add_argument(
        "--plan",
        default=PRODUCT_PLAN,
        metavar="NAME|FILE",
        help="adaptation plan: a packaged plan's name or a YAML file (default: %(default)s)",
    )
    b.add_argument("--skip-adapt", action="store_true", help="train and index only: teach no language")
    b.add_argument(
        "--images",
        metavar="DIR",
        help="the photos to index, searched recursively (default: <data root>/flickr8k-224/images)",
    )
    b.add_argument(
        "--threads",
        type=int,
        metavar="N",
        help="torch threads of every stage (default: the config's for training, torch's own for the rest)",
    )
    b.add_argument(
        "--precision",
        default="fp32",
        choices=["fp32", "bf16", "auto"],
        help="training steps' precision: fp32 (default: the product model, the same recipe on every machine); "
        "auto is bf16 autocast where this machine computes bf16 natively (a CPU with AVX512_BF16 or AMX, a GPU "
        "with bf16), fp32 elsewhere: faster, another checkpoint; photo maps, sentence vectors and evaluation stay "
        "fp32",
    )
    b.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override a config field for the training, as `polyvse train --set` (repeatable)",
    )
    b.add_argument("--smoke", action="store_true", help="train a few steps on a slice of the data (tests)")
    b.add_argument("--data-root", metavar="DIR", help="data root (default: $POLYVSE_DATA, else ~/.cache/polyvse)")
    b.add_argument("--quiet", action="store_true", help="no progress bars")
    add_device_args(b)
    b.set_defaults(func=run_build)


def run_build(args) -> int:
    Build(args).run()
    return 0


def same_training(metrics: dict, cfg, smoke: bool) -> bool:
    """Whether a finished run (its metrics.json) trained ``cfg``: the same fields up to the thread count (a run
    may resume at another) and to fields added since with their defaults."""
    from polyvse_train.config import changed_fields

    def key(flat: dict) -> dict:
        return {k: v for k, v in changed_fields(flat).items() if k != "threads"}

    return bool(metrics.get("smoke", False)) == smoke and key(metrics.get("config", {})) == key(cfg.to_dict())


class Build:
    """One `polyvse model build`: its inputs resolved and checked before anything runs (a bad plan fails before
    hours of training), then the stages in order."""

    def __init__(self, args: argparse.Namespace):
        from polyvse.adaptation.plan import read_plan
        from polyvse.errors import DataError
        from polyvse.util.paths import data_root
        from polyvse_train.config import TrainConfig
        from polyvse_train.config.packaged import PLAN, resolve_config

        from .train import apply_overrides

        self.args, self.out = args, Path(args.out)
        self.config_path = resolve_config(args.config)
        cfg = apply_overrides(TrainConfig.load(self.config_path), args)
        if args.threads is not None:
            if args.threads < 1:
                raise DataError(f"--threads must be 1 or more, not {args.threads}")
            cfg = cfg.with_overrides({"threads": args.threads}, source="--threads")
        self.cfg = cfg
        self.plan_path = None if args.skip_adapt else resolve_config(args.plan, kind=PLAN)
        self.plan = None if args.skip_adapt else read_plan(self.plan_path)
        self.root = data_root(args.data_root)
        self.images = Path(args.images).expanduser() if args.images else self.root / "flickr8k-224" / "images"
        if not self.images.is_dir():
            raise DataError(
                "no photo folder to index: give --images DIR (or fetch flickr8k-224: `polyvse data fetch all`)",
                self.images,
            )
        self.stages = [("train", self.train), ("index", self.index)] + (
            [] if args.skip_adapt else [("adapt", self.adapt)]
        )
        self.record = self._previous_record()

    # -- the record -------------------------------------------------------------------------------------------
    def _previous_record(self) -> dict:
        path = self.out / RECORD
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}

    def _stage_before(self, name: str) -> dict:
        return dict((self.record.get("stages") or {}).get(name) or {})

    def _write(self, complete: bool = False) -> None:
        import torch

        from polyvse.provenance import checkpoint_model, provenance
        from polyvse.util.atomic import write_json_atomic

        checkpoint = self.out / "checkpoint"
        self.record = {
            "out": str(self.out),
            "complete": complete,
            "config": {"name": self.cfg.name, "file": str(self.config_path)},
            "plan": str(self.plan_path) if self.plan_path else None,
            "images": str(self.images),
            "machine": self.machine(),
            "precision": (self.record.get("stages") or {})
            .get("train", {})
            .get("precision", {"asked": self.args.precision}),
            "threads": {"train": self.cfg.schedule.threads, "index_and_adapt": torch.get_num_threads()},
            "stages": self.record.get("stages", {}),
            **({"fingerprints": self.record["fingerprints"]} if complete else {}),
            "provenance": provenance(model=checkpoint_model(checkpoint, config=self.cfg.name)),
        }
        write_json_atomic(self.out / RECORD, self.record)

    def machine(self) -> dict:
        """This machine (polyvse.provenance), whether it computes bf16 natively, and the device the build ran on."""
        import torch

        from polyvse.device import cpu_has_native_bf16, resolve_device
        from polyvse.provenance import machine

        device = resolve_device(self.args.device)
        native = torch.cuda.is_bf16_supported() if device.type == "cuda" else cpu_has_native_bf16()
        return {**machine(), "device": str(device), "native_bf16": bool(native)}

    # -- the stages -------------------------------------------------------------------------------------------
    def run(self) -> dict:
        if self.args.threads is not None:
            import torch

            torch.set_num_threads(self.args.threads)
        n = len(self.stages)
        for i, (name, stage) in enumerate(self.stages, 1):
            t0 = time.perf_counter()
            done_before, info = stage(f"[{i}/{n}] {name}")
            seconds = round(time.perf_counter() - t0, 1)
            if done_before:
                before = self._stage_before(name)
                entry = {**info, "done_before": True, "seconds": before.get("seconds"), "check_seconds": seconds}
                print(f"[{i}/{n}] {name}: done before ({seconds:.1f} s to check)", flush=True)
            else:
                entry = {**info, "done_before": False, "seconds": seconds}
                print(f"[{i}/{n}] {name}: done, {seconds:.1f} s", flush=True)
            self.record.setdefault("stages", {})[name] = entry
            self._write()
        self.record["fingerprints"] = self.fingerprints()
        self._write(complete=True)
        took = ", ".join(f"{name} {self.record['stages'][name].get('seconds') or 0:.0f} s" for name, _ in self.stages)
        print(
            f"model: {self.out / 'checkpoint'}  index: {self.out / 'index'}\nbuild record: {self.out / RECORD} "
            f"({took})",
            flush=True,
        )
        return self.record

    def train(self, header: str) -> tuple[bool, dict]:
        from polyvse_train.train import train

        metrics_path = self.out / "metrics.json"
        if metrics_path.is_file():
            metrics = json.loads(metrics_path.read_text(encoding="utf-8"))
            if same_training(metrics, self.cfg, self.args.smoke):
                print(f"{header}: {self.cfg.name} in {self.out} (trained before)", flush=True)
                return True, self._train_info(metrics)
            self._move_aside()
        command = [
            "polyvse train",
            f"--config {self.args.config}",
            f"--out {self.out}",
            "--resume",
            f"--precision {self.args.precision}",
        ] + [f"--set {x}" for x in self.args.overrides]
        command += [f"--set threads={self.args.threads}"] if self.args.threads is not None else []
        command += ["--smoke"] if self.args.smoke else []
        print(f"{header}: {self.cfg.name} into {self.out} ({' '.join(command)})", flush=True)
        metrics = train(
            self.cfg,
            self.out,
            self.root,
            resume=True,
            smoke=self.args.smoke,
            progress=not self.args.quiet,
            device=self.args.device,
            precision=self.args.precision,
        )
        return False, self._train_info(metrics)

    def _train_info(self, metrics: dict) -> dict:
        return {
            "config": self.cfg.name,
            "precision": {"asked": self.args.precision, "used": metrics.get("precision")},
            "wall_time_s": metrics.get("wall_time_s"),
            "cpu_time_s": metrics.get("cpu_time_s"),
            "threads_used": metrics.get("threads_used"),
        }

    def _move_aside(self) -> None:
        stale = self.out.with_name(f"{self.out.name}.stale-{time.strftime('%Y%m%d-%H%M%S')}")
        self.out.rename(stale)
        self.record = {}
        print(f"{self.out} holds a model of another config; kept in {stale}, training anew", flush=True)

    def trained_checkpoint(self) -> Path:
        from polyvse.adaptation.plan import trained_checkpoint

        return trained_checkpoint(self.out)

    def index(self, header: str) -> tuple[bool, dict]:
        import polyvse
        from polyvse.data.user_files import photo_source
        from polyvse.device import loader_workers, resolve_device
        from polyvse.index import build_index, index_accepts
        from polyvse.util.paths import cache_root

        photos, base = photo_source(str(self.images), None)
        names = [p.relative_to(base).as_posix() for p in photos]
        index = self.out / "index"
        device = resolve_device(self.args.device)
        model = polyvse.load(self.trained_checkpoint(), device=device)
        before = self._stage_before("index")
        photo_set = {
            "images": str(self.images.resolve()),
            "photos": len(photos),
            "names_sha256": hashlib.sha256("\n".join(names).encode("utf-8")).hexdigest(),
        }
        if (
            (index / "manifest.json").is_file()
            and all(before.get(k) == v for k, v in photo_set.items())
            and index_accepts(index, model)
        ):
            print(f"{header}: {len(photos):,} photos of {self.images} in {index} (indexed before)", flush=True)
            return True, {k: before[k] for k in (*photo_set, "indexed", "unreadable") if k in before}
        print(
            f"{header}: {len(photos):,} photos (polyvse index build --checkpoint {self.out / 'checkpoint'} "
            f"--images {self.images} --out {index} --force)",
            flush=True,
        )
        report = build_index(
            model,
            photos,
            index,
            cache_dir=cache_root(self.args.data_root) / "features",
            names=names,
            checkpoint_path=self.out / "checkpoint",
            num_workers=loader_workers(device),
            progress=not self.args.quiet,
            overwrite=True,
        )
        print(
            f"{report.added:,} photos indexed ({len(report.failures)} unreadable, {report.extracted:,} features "
            f"computed, {report.cached:,} from the cache)",
            flush=True,
        )
        return False, {**photo_set, "indexed": report.index.count, "unreadable": len(report.failures)}

    def adapt(self, header: str) -> tuple[bool, dict]:
        from polyvse.adaptation.plan import RECORD as ADAPTED, Stage

        stage = Stage(
            self.out,
            self.plan,
            self.args.data_root,
            report=lambda s: print(s, flush=True),
            progress=not self.args.quiet,
        )
        langs = ", ".join(e.lang for e in self.plan.taught)
        record = stage.finished_record()
        done_before = record is not None
        print(f"{header}: {langs} (plan {self.plan_path})" + (" (taught before)" if done_before else ""), flush=True)
        if not done_before:
            record = stage.run()
        return done_before, {
            "plan": str(self.plan_path),
            "record": str(self.out / ADAPTED),
            "languages": {
                lang: {"method": x["method"], "seconds": x.get("seconds")} for lang, x in record["languages"].items()
            },
        }

    def fingerprints(self) -> dict:
        """The trained checkpoint's, the model's (``<out>/checkpoint``, once the index accepts it) and the index's."""
        from polyvse.adaptation.plan import Stage
        from polyvse.provenance import checkpoint_fingerprint

        model = Stage(self.out, self.plan).check_index(self.out / "checkpoint")
        built = json.loads((self.out / "index" / "manifest.json").read_text(encoding="utf-8"))["model"]
        return {
            "trained": checkpoint_fingerprint(self.trained_checkpoint()),
            "model": model,
            "index": built["fingerprint"],
            "index_photo_side": built.get("photo_fingerprint"),
        }
