#!/usr/bin/env bash
# experiment=fastest on the H200 (the call ran 447 s) beside the bare loop with the same settings, every run with its proof that it trained.
set -u
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --find-links .carry/wh rn50 2>&1 | tail -2
res=$(mktemp -d)
BUDGET_S=545 OLD=/nonexistent benchmarks/trains_gpu.sh "$res" fastest
tar -czf "$OUT/h200_fastest.tgz" -C "$res" .
