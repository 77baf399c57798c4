#!/usr/bin/env bash
# The method zoo (`make zoo`, `make zoo-f8k-full`): `polyvse zoo run --jobs $JOBS` (default 2: one worker per core
# of a 2-core machine, each training on one thread and claiming the next unclaimed run of the spec $SPEC, default
# configs/zoo/cpu.yaml), then `polyvse zoo report` writes docs/results.md + plots (for a spec with a title, its
# block of docs/results.md), and `polyvse zoo records` copies the finished runs' record files (what the report
# reads, kilobytes a run) to results/<runs folder name>, to be committed.
# Resumable: run it again after an interruption and only unfinished runs train. Extra arguments go to
# `polyvse zoo run` (e.g. --max-hours 2, --configs vse,vsepp).
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
SPEC=${SPEC:-configs/zoo/cpu.yaml}
status=0
"$BIN/polyvse" zoo run --spec "$SPEC" --jobs "${JOBS:-2}" "$@" || status=$?
"$BIN/polyvse" zoo report --spec "$SPEC" || status=$?
"$BIN/polyvse" zoo records --spec "$SPEC" || status=$?
exit "$status"
