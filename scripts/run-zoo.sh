#!/usr/bin/env bash
# The method zoo (`make zoo`): two `polyvse zoo run` processes share the plan of configs/zoo/cpu.yaml (each
# claims the next unclaimed run; one core each), then `polyvse zoo report` writes docs/results.md + plots.
# Resumable: run it again after an interruption and only unfinished runs train. Extra arguments go to
# `polyvse zoo run` (e.g. --max-hours 2, --configs vse,vsepp).
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
status=0
"$BIN/polyvse" zoo run "$@" & first=$!
sleep 10  # the first process claims its run before the second looks
"$BIN/polyvse" zoo run "$@" || status=$?
wait "$first" || status=$?
"$BIN/polyvse" zoo report || status=$?
exit "$status"
