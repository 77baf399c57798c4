# Two commands for a fresh machine: `make demo` and `make test` (both run `make setup` first; `make test` also
# installs headless Chromium for the browser test).
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
SHARED_DATA := $(abspath ../shared/data)
# Data root for make targets: a folder inside the repo (git-ignored), filled from ../shared/data when present.
export POLYVSE_DATA ?= $(CURDIR)/.data

.PHONY: setup data demo walkthrough test bench zoo clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade-strategy only-if-needed -e '.[dev]'
	@touch $@

data: setup
	@if [ -d "$(SHARED_DATA)" ]; then \
		$(BIN)/polyvse data fetch all --from "$(SHARED_DATA)"; \
	else \
		$(BIN)/polyvse data fetch all; \
	fi

demo: setup data
	$(BIN)/polyvse demo --out runs/demo

# docs/service.md: index, search and serve the demo checkpoint (runs/demo/checkpoint, from `make demo`) for real
walkthrough: setup data
	$(BIN)/python scripts/service_walkthrough.py

# Headless Chromium for tests/test_browser.py: installed once with apt-get, a no-op afterwards. Where it cannot
# be installed (no root, no network) the other tests still run and the browser test fails saying why.
test: setup
	@bash scripts/install-browser.sh || echo "make test: going on without Chromium (see above)" >&2
	$(BIN)/python -m pytest -q

bench: setup data
	$(BIN)/python benchmarks/run_all.py

# the method zoo: every config of configs/ on F8K-ML (5 folds + official split), then docs/results.md
zoo: setup data
	BIN=$(BIN) bash scripts/run-zoo.sh

clean:
	rm -rf runs .pytest_cache
