# Two commands for a fresh machine: `make demo` and `make test` (both run `make setup` first; `make test` also
# installs headless Chromium for the browser test).
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
SHARED_DATA := $(abspath ../shared/data)
# Data root for make targets: a folder inside the repo (git-ignored), filled from ../shared/data when present.
export POLYVSE_DATA ?= $(CURDIR)/.data

.PHONY: setup lock data demo model records walkthrough test bench zoo zoo-f8k-full docs clean

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

# the quick start: train and evaluate the demo model, index its photos (runs/demo/index), show one search, and print
# the `polyvse search` and `polyvse serve` commands to run next
demo: setup data
	$(BIN)/polyvse demo --out runs/demo

# The product model: `polyvse model build` trains the product recipe (f8k-full/polyvse-best, a packaged config)
# on f8k-full's official split (5,867 photos), indexes all 7,941 photos for `polyvse search` / `polyvse serve`,
# then teaches the languages of the adaptation plan (product: MultiScript30k's lines, every evaluation photo and
# sentence left out) into one checkpoint, runs/model/checkpoint, once the index is checked to accept it (the
# trained one is kept in runs/model/trained-checkpoint). Resumable: after a stop, run it again; a finished stage
# is skipped, a finished model of another config is moved aside (kept). Sentence vectors of the frozen towers and
# the photo maps are cached (<data root>/cache, or $POLYVSE_CACHE). Each stage's seconds, the machine, precision,
# threads and fingerprints: runs/model/build.json (the training's own times: runs/model/metrics.json).
# threads: two by default (both cores of the 2-core machine; the config says one), the setting the whole target was
# timed at from empty caches (benchmarks/results/make_model.json); `make model MODEL_THREADS=1` for one,
# `MODEL_THREADS=` for the config's own; a stopped run may resume at another thread count
MODEL_THREADS ?= 2
# training steps' precision: fp32 on every machine, so one recipe makes one product model whatever the CPU (its
# figures are of an fp32 build); `make model MODEL_PRECISION=auto` trains faster at bf16 autocast where the machine
# computes bf16 natively (a CPU with AVX512_BF16 or AMX, a GPU with bf16): a different checkpoint, not the product's
MODEL_PRECISION ?= fp32
model: setup data
	$(BIN)/polyvse model build --out runs/model --precision $(MODEL_PRECISION) \
		$(if $(MODEL_THREADS),--threads $(MODEL_THREADS))

# every record of the product model regenerated on runs/model (RECORDS_ARGS=--build times make model first)
records: setup data
	$(BIN)/python scripts/product_records.py $(RECORDS_ARGS)

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

# the speed suite; it times `polyvse search` on the demo model's index (`make demo` first when absent) and on
# the product model's (`make model`, ~1 h, not built here: without it that figure and the 10M photos data are
# skipped, saying so)
bench: setup data runs/demo/index/manifest.json
	$(BIN)/python benchmarks/run_all.py

# the demo's index: `polyvse demo` builds it after training
runs/demo/index/manifest.json:
	$(MAKE) demo

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
