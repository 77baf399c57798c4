"""What the commands share, in one module: the --device (and --precision) options every computing command takes
(resolved by polyvse.device), --photo-fit, and the listing of unreadable photos."""

from __future__ import annotations

import argparse


def add_device_args(p: argparse.ArgumentParser, precision: bool = False) -> None:
    """--device; with ``precision``, also --precision (bf16 autocast of the training steps)."""
    p.add_argument(
        "--device",
        default="auto",
        metavar="DEVICE",
        help="where to compute: auto (CUDA when available, else CPU), cpu, cuda or cuda:N "
        "(default: %(default)s; under torchrun auto and cuda mean each rank's own GPU)",
    )
    if precision:
        p.add_argument(
            "--precision",
            default="fp32",
            choices=["fp32", "bf16", "auto"],
            help="fp32 (default) or bf16 autocast of the training steps, on CUDA or a CPU (fast on "
            "one with native bf16: AVX512_BF16 or AMX); auto: bf16 where this machine computes "
            "it natively, else fp32 (training.json records which); features and evaluation "
            "stay fp32",
        )


def device_of(args):
    """The torch.device that --device names, checked against this machine (DeviceError otherwise)."""
    from polyvse.device import resolve_device

    return resolve_device(getattr(args, "device", "auto"))


def workers_of(args, device) -> int:
    """--workers, or the photo-decoding workers polyvse.device.loader_workers sizes for ``device``."""
    from polyvse.device import loader_workers
    from polyvse.errors import DataError

    if args.workers is None:
        return loader_workers(device)
    if args.workers < 0:
        raise DataError(f"--workers must be 0 or more, not {args.workers}")
    return args.workers


PHOTO_FITS = {"squash": True, "crop": False}


def add_photo_fit_arg(p) -> None:
    p.add_argument(
        "--photo-fit",
        choices=sorted(PHOTO_FITS),
        default=None,
        help="how photos that are not square meet the backbone: squash (resize to a square, ignoring "
        "the aspect ratio) or crop (keep it, centre crop); default: as the model trained (squash "
        "for models trained on f8k-full's squashed photos, else crop); the decisions log (docs) has "
        "both measured",
    )


def squash_of(args) -> bool | None:
    """--photo-fit as polyvse.load's squash_photos (None: the checkpoint's own)."""
    fit = getattr(args, "photo_fit", None)
    return None if fit is None else PHOTO_FITS[fit]


_MAX_LISTED_FAILURES = 20


def print_failures(failures: list, heading: str) -> None:
    """The first unreadable photos and why, for people (the rest counted)."""
    if not failures:
        return
    print(heading)
    for path, reason in failures[:_MAX_LISTED_FAILURES]:
        print(f"  {path}: {reason}")
    if len(failures) > _MAX_LISTED_FAILURES:
        print(f"  ... and {len(failures) - _MAX_LISTED_FAILURES} more")
