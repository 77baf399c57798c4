"""The base install (no torch) against the full one, side by side in one run.

    python benchmarks/bench_light_install.py --checkpoint DIR [--photos 300] [--light-venv DIR] \
        [--out benchmarks/results/light_install.json]

Measured:
- each install's size on disk: a fresh venv holding this checkout's wheel and its base dependencies at the lock's
  versions (polyvse_tooling.light_install; ``--light-venv`` reuses one made so), against the full ``.venv``
  (``make setup``: every extra);
- ``polyvse index build`` of the first ``--photos`` Flickr8k photos ($POLYVSE_DATA or ../shared/data), each run a
  fresh process on 2 threads (OMP_NUM_THREADS=2; ONNX Runtime reads it too): the base install (ONNX Runtime), the
  full install through torch (an empty feature cache, so the backbone runs on every photo), and the full install
  through ONNX Runtime ($POLYVSE_IMAGE_ENCODER=onnx: the engine apart from the install) -> photos/s;
- a fresh process's ``polyvse search`` by text and by photo on that index, in each install, ``--repeats`` times
  in turns (A B A B ...), median wall seconds.

The checkpoint is whatever is at hand (the record names it and its fingerprint); its ONNX image encoder must be
written (the trainer does; else ``polyvse export onnx``). Run it on a quiet machine. Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from polyvse_tooling.light_install import build_wheel, make_light_venv, tree_bytes  # noqa: E402

QUERY, LANG = "a dog runs through the grass", "en"


def _native_bf16() -> bool:
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def _env(threads: int, encoder: str | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("POLYVSE_IMAGE_ENCODER", "PYTHONPATH")}
    env.update({"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": str(threads)})
    if encoder:
        env["POLYVSE_IMAGE_ENCODER"] = encoder
    return env


def _timed(argv: list, env: dict, cwd: Path) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run([str(a) for a in argv], env=env, cwd=cwd, capture_output=True, text=True, timeout=3600)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, argv))}: {proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checkpoint", required=True, help="checkpoint folder (with its image_encoder.onnx)")
    ap.add_argument("--photos", type=int, default=300, help="Flickr8k photos indexed (default: %(default)s)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--light-venv",
        help="a base-install venv made by polyvse_tooling.light_install (default: build one in a temporary folder)",
    )
    ap.add_argument("--full-venv", default=str(REPO / ".venv"))
    ap.add_argument("--data", default=os.environ.get("POLYVSE_DATA") or str(REPO.parent / "shared" / "data"))
    ap.add_argument("--note", default="", help="what the checkpoint is (the record says it)")
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "light_install.json"))
    args = ap.parse_args(argv)

    checkpoint = Path(args.checkpoint).resolve()
    if not (checkpoint / "image_encoder.onnx").is_file():
        sys.exit(f"{checkpoint}: no image_encoder.onnx; write it with polyvse export onnx --checkpoint {checkpoint}")
    photos = sorted((Path(args.data) / "flickr8k" / "images").glob("*.jpg"))[: args.photos]
    if not photos:
        sys.exit(f"{args.data}/flickr8k/images: no photos")
    full = Path(args.full_venv)
    tmp = Path(tempfile.mkdtemp(prefix="bench-light-"))
    try:
        t0 = time.perf_counter()
        if args.light_venv:
            light = Path(args.light_venv)
            install_s = None
        else:
            light = make_light_venv(REPO, build_wheel(REPO, tmp / "wheel"), tmp / "venv")
            install_s = time.perf_counter() - t0
        listing = tmp / "photos.txt"
        listing.write_text("".join(f"{p}\n" for p in photos))
        runs = {
            "base install, ONNX Runtime": (light, None),
            "full install, torch": (full, "torch"),
            "full install, ONNX Runtime": (full, "onnx"),
        }
        build = {}
        for name, (venv, encoder) in runs.items():
            out = tmp / f"index-{len(build)}"
            seconds = _timed(
                [
                    venv / "bin" / "polyvse",
                    "index",
                    "build",
                    "--checkpoint",
                    checkpoint,
                    "--list",
                    listing,
                    "--out",
                    out,
                    "--quiet",
                    "--cache-dir",
                    tmp / f"cache-{len(build)}",
                ],
                _env(args.threads, encoder),
                tmp,
            )
            build[name] = {"seconds": round(seconds, 2), "photos_per_s": round(len(photos) / seconds, 2)}
        index = tmp / "index-0"
        search: dict = {name: {"text": [], "photo": []} for name in ("base install", "full install")}
        for _ in range(args.repeats):
            for name, venv in (("base install", light), ("full install", full)):
                exe = venv / "bin" / "polyvse"
                search[name]["text"].append(
                    _timed([exe, "search", "--index", index, QUERY, "--lang", LANG], _env(args.threads), tmp)
                )
                search[name]["photo"].append(
                    _timed([exe, "search", "--index", index, "--image", photos[0]], _env(args.threads), tmp)
                )
        sizes = {"base install": tree_bytes(light), "full install": tree_bytes(full)}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    torch_rate = build["full install, torch"]["photos_per_s"]
    result = {
        "photos": len(photos),
        "data": "flickr8k/images (first photos by name)",
        "threads": args.threads,
        "checkpoint_note": args.note,
        "install_gb": {k: round(v / 1e9, 3) for k, v in sizes.items()},
        "base_install_goal_gb": 1.0,
        "base_install_within_goal": sizes["base install"] <= 1e9,
        "base_install_seconds": None if install_s is None else round(install_s, 1),
        "index_build": build,
        "onnx_speedup_vs_torch": round(build["base install, ONNX Runtime"]["photos_per_s"] / torch_rate, 2),
        "search_s_median": {
            name: {kind: round(statistics.median(v), 3) for kind, v in kinds.items()} for name, kinds in search.items()
        },
        "search_s_all": {
            name: {kind: [round(x, 3) for x in v] for kind, v in kinds.items()} for name, kinds in search.items()
        },
        "cpu_native_bf16": _native_bf16(),
        "load_average_at_end": list(os.getloadavg()),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
    }
    from polyvse.provenance import checkpoint_model, provenance
    from polyvse.util.atomic import write_json_atomic

    result["provenance"] = provenance(model=checkpoint_model(checkpoint))
    write_json_atomic(args.out, result)
    print(
        json.dumps(
            {k: result[k] for k in ("install_gb", "index_build", "onnx_speedup_vs_torch", "search_s_median")}, indent=2
        )
    )
    return result


if __name__ == "__main__":
    main()
