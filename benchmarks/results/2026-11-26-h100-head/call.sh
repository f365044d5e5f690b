#!/usr/bin/env bash
# Asked for an H200, ran on an H100 (env.txt; the call ran 537 s): the defaults beside the bare loop (and foreach SGD), then the presets as the budget allows; every run with its proof.
set -u
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --find-links .carry/wh rn50 2>&1 | tail -2
res=$(mktemp -d)
BUDGET_S=520 OLD=/nonexistent benchmarks/trains_gpu.sh "$res" "core presets"
tar -czf "$OUT/h200_core.tgz" -C "$res" .
