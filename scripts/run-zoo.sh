#!/usr/bin/env bash
# The method zoo (`make zoo`, `make zoo-f8k-full`): two `polyvse zoo run` processes share the plan of the spec
# $SPEC (default configs/zoo/cpu.yaml; each claims the next unclaimed run; one core each), then `polyvse zoo
# report` writes docs/results.md + plots (for a spec with a title, its block of docs/results.md).
# Resumable: run it again after an interruption and only unfinished runs train. Extra arguments go to
# `polyvse zoo run` (e.g. --max-hours 2, --configs vse,vsepp).
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
SPEC=${SPEC:-configs/zoo/cpu.yaml}
status=0
"$BIN/polyvse" zoo run --spec "$SPEC" "$@" & first=$!
sleep 10  # the first process claims its run before the second looks
"$BIN/polyvse" zoo run --spec "$SPEC" "$@" || status=$?
wait "$first" || status=$?
"$BIN/polyvse" zoo report --spec "$SPEC" || status=$?
exit "$status"
