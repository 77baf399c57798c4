# Two commands for a fresh machine: `make demo` and `make test` (both run `make setup` first; `make test` also
# installs headless Chromium for the browser test).
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
SHARED_DATA := $(abspath ../shared/data)
# Data root for make targets: a folder inside the repo (git-ignored), filled from ../shared/data when present.
export POLYVSE_DATA ?= $(CURDIR)/.data

.PHONY: setup lock data demo model walkthrough test bench zoo zoo-f8k-full docs clean

setup: $(VENV)/.installed

# constraints.txt locks every package, indirect ones too (tests/test_dependency_lock.py): a kept machine and a fresh one
# install the same versions
$(VENV)/.installed: pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade-strategy only-if-needed -c constraints.txt -e '.[dev]'
	@touch $@

# after changing a dependency in pyproject.toml: install it into the venv, then write the lock from what is installed
lock: setup
	@{ sed -n '1,2p' constraints.txt; $(BIN)/pip freeze --all --exclude-editable | grep -v -e '^#' -e '^pip=='; } > constraints.txt.tmp
	@mv constraints.txt.tmp constraints.txt

data: setup
	@if [ -d "$(SHARED_DATA)" ]; then \
		$(BIN)/polyvse data fetch all --from "$(SHARED_DATA)"; \
	else \
		$(BIN)/polyvse data fetch all; \
	fi

demo: setup data
	$(BIN)/polyvse demo --out runs/demo

# The product model (issue #13): configs/f8k-full/polyvse-best.yaml trained on f8k-full's official split (5,867
# photos), then an index of all 7,941 photos for `polyvse search` / `polyvse serve`. Resumable: after a stop, run it
# again. Sentence vectors of the frozen towers are cached (<data root>/cache/sentences, or $POLYVSE_CACHE): the
# first run computes e5's hidden states entering its fine-tuned last layer and USE's vectors for the captions it
# needs (test split + every training caption) and the teacher's Multi30K lines, and extracts the EfficientNet-Lite2
# maps entering its fine-tuned last block (and three augmented views of each training photo); then 15 epochs (mostly
# the two tails) and the CSLS banks of the training photos and captions the checkpoint carries. Its times are
# written to runs/model/metrics.json (README: time per run).
MODEL_CONFIG := configs/f8k-full/polyvse-best.yaml
# training threads: two by default (both cores of the 2-core machine; the config says one), the setting the whole
# target was timed at from empty caches (benchmarks/results/make_model.json: 74.6 min for the recipe adopted on 2026-11-28,
# at bf16 on a CPU with AVX512_BF16); `make model MODEL_THREADS=1` for one, `MODEL_THREADS=` for the config's own; a stopped run
# may resume at another thread count
MODEL_THREADS ?= 2
# training steps' precision: auto = bf16 autocast where this machine computes bf16 natively (a CPU with AVX512_BF16
# or AMX, a GPU with bf16), fp32 elsewhere (polyvse.device.training_precision; the run records which); its photo
# maps, sentence vectors and evaluation stay fp32. `make model MODEL_PRECISION=fp32` for the fp32 run
MODEL_PRECISION ?= auto
model: setup data runs/model/metrics.json runs/model/index/manifest.json runs/model/adapted.json

# a finished model of an older config is moved aside (kept), never mixed into the new run; an interrupted one resumes
runs/model/metrics.json: $(MODEL_CONFIG)
	@if [ -e runs/model/metrics.json ]; then d=runs/model.stale-$$(date +%Y%m%d-%H%M%S); mv runs/model $$d; \
		echo "make model: $(MODEL_CONFIG) changed; the previous model is kept in $$d"; fi
	$(BIN)/polyvse train --config $(MODEL_CONFIG) --out runs/model --resume --precision $(MODEL_PRECISION) \
		$(if $(MODEL_THREADS),--set threads=$(MODEL_THREADS))

runs/model/index/manifest.json: runs/model/metrics.json
	$(BIN)/polyvse index build --checkpoint runs/model/checkpoint --images $(POLYVSE_DATA)/flickr8k-224/images \
		--out runs/model/index --force --quiet

# Then the languages of $(ADAPT_PLAN) taught from MultiScript30k's lines (issue #55): for each, `polyvse data parallel`
# (every evaluation photo and sentence left out) and `polyvse adapt` from the previous step's checkpoint, so one
# checkpoint serves them all; it becomes runs/model/checkpoint (the trained one is kept in runs/model/trained-checkpoint)
# once the index above is checked to accept it (adaptation moves no photo and no old language). Resumable: a finished
# language is not taught again, a stopped one resumes. Its record, with each language's seconds: runs/model/adapted.json
ADAPT_PLAN := configs/adapt/product.yaml
runs/model/adapted.json: runs/model/index/manifest.json $(ADAPT_PLAN)
	$(BIN)/python scripts/adapt_model.py --model runs/model --plan $(ADAPT_PLAN) \
		$(if $(MODEL_THREADS),--threads $(MODEL_THREADS))

# docs/service.md: index, search and serve the product model (runs/model/checkpoint, from `make model`) for real
walkthrough: setup data model
	$(BIN)/python scripts/service_walkthrough.py

# Headless Chromium for tests/test_browser.py: installed once with apt-get, a no-op afterwards. Where it cannot
# be installed (no root, no network) the other tests still run and the browser test fails saying why.
# the suite in TEST_WORKERS processes (pytest-xdist; default 2, one per core; 0 runs it in this process)
TEST_WORKERS ?= 2
test: setup
	@bash scripts/install-browser.sh || echo "make test: going on without Chromium (see above)" >&2
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS)

# the speed suite; it times `polyvse search` on the demo model's index (built here first when absent: ~2 min) and on
# the product model's (`make model`, ~1 h, not built here: without it that figure and the 10M photos data are
# skipped, saying so)
bench: setup data runs/demo/index/manifest.json
	$(BIN)/python benchmarks/run_all.py

runs/demo/index/manifest.json:
	@test -e runs/demo/checkpoint/config.json || $(MAKE) demo
	$(BIN)/polyvse index build --checkpoint runs/demo/checkpoint --images $(POLYVSE_DATA)/flickr8k/images \
		--out runs/demo/index --force --quiet

# the method zoo: every config of configs/ on F8K-ML (5 folds + official split), then docs/results.md;
# JOBS worker processes of one thread each (default 2, one per core of the 2-core machine)
JOBS ?= 2
zoo: setup data
	BIN=$(BIN) JOBS=$(JOBS) bash scripts/run-zoo.sh

# the same zoo on f8k-full's official split (configs/zoo/f8k-full.yaml), then its block of docs/results.md
zoo-f8k-full: setup data
	BIN=$(BIN) JOBS=$(JOBS) SPEC=configs/zoo/f8k-full.yaml bash scripts/run-zoo.sh

# the documentation site (mkdocs.yml) into site/: mkdocs build --strict, so a broken link, a missing page or a record
# that does not exist fails it; the command-line and Python API references are generated from the code at build time
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

clean:
	rm -rf runs .pytest_cache
