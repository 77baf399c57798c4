"""`polyvse export onnx --checkpoint DIR`: write a checkpoint's image encoder as ONNX beside its weights.

An install without torch (``pip install polyvse``) embeds photos through that graph (polyvse.features.onnx_encoder):
index builds, photo searches, the service. The trainer and ``polyvse adapt`` write it with every checkpoint; this
command writes it for a checkpoint saved without one (or by an older polyvse). It needs torch and onnx
(``pip install 'polyvse[train]'``).
"""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser("export", help="export a checkpoint's image encoder (ONNX, for installs without torch)")
    formats = p.add_subparsers(dest="export_format", required=True)
    o = formats.add_parser(
        "onnx",
        help="write image_encoder.onnx into a checkpoint folder",
        description="Write the checkpoint's image side (backbone, fine-tuned tail, image head: normalised crops to "
        "joint-space vectors) as image_encoder.onnx, with its preprocessing in image_encoder.json, into the "
        "checkpoint folder. Then `pip install polyvse` without torch builds indexes and searches by photo with it.",
    )
    o.add_argument("--checkpoint", required=True, metavar="DIR", help="checkpoint folder")
    o.add_argument(
        "--check",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="compare the graph's vectors with the torch model's on a few synthetic photos (default: on)",
    )
    o.set_defaults(func=run_onnx)


def run_onnx(args) -> int:
    import importlib.util
    import time

    from polyvse.errors import CheckpointError

    missing = [m for m in ("torch", "onnx") if importlib.util.find_spec(m) is None]
    if missing:
        raise CheckpointError(f"polyvse export onnx needs {' and '.join(missing)}: pip install 'polyvse[train]'")
    from polyvse.features.onnx_export import export_image_encoder
    from polyvse.model.checkpoint import WEIGHTS, load_checkpoint

    t0 = time.time()
    folder = Path(args.checkpoint)
    path = export_image_encoder(load_checkpoint(folder), folder, folder / WEIGHTS)
    print(f"image encoder: {path} ({path.stat().st_size / 2**20:.1f} MiB, {time.time() - t0:.1f} s)")
    if args.check:
        cosine = check_export(args.checkpoint)
        print(f"checked against the torch model: lowest cosine {cosine:.6f} on synthetic photos")
    return 0


def check_export(path, seed: int = 0) -> float:
    """The lowest cosine between the exported graph's vectors and the torch model's on synthetic photos of several
    shapes; CheckpointError below MIN_COSINE (the graph does not compute the model)."""
    import numpy as np
    from PIL import Image

    import polyvse
    from polyvse.errors import CheckpointError
    from polyvse.features.onnx_encoder import ENCODER_FILE, OnnxImageEncoder
    from polyvse.features.onnx_export import MIN_COSINE

    rng = np.random.default_rng(seed)
    images = [
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
        for w, h in ((320, 240), (240, 320), (300, 300), (500, 375))
    ]
    model = polyvse.load(path, device="cpu")
    a = model.encode_image(images)
    b = OnnxImageEncoder(path, squash=model.checkpoint.squash_photos).encode(images)
    low = float(((a * b).sum(1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-12)).min())
    if not low >= MIN_COSINE:
        raise CheckpointError(
            f"{Path(path) / ENCODER_FILE}: its vectors differ from the torch model's (cosine "
            f"{low:.6f} < {MIN_COSINE}); keep embedding photos with torch and report this"
        )
    return low
