#!/usr/bin/env bash
# The defaults on the H200 beside the bare loop (and foreach SGD), then the presets as the budget allows; every run with its proof.
set -u
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --find-links .carry/wh rn50 2>&1 | tail -2
res=$(mktemp -d)
BUDGET_S=520 OLD=/nonexistent benchmarks/trains_gpu.sh "$res" "core presets"
tar -czf "$OUT/h200_core.tgz" -C "$res" .
