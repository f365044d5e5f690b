#!/usr/bin/env bash
# rn50's ranks with the frozen heap (4eb7df8) against the code before it (.carry/old = bcfac64) and the bare loop,
# in one call, every run with its proof that it trained. PHASE: core or fastest.
set -u
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --find-links .carry/wh rn50 2>&1 | tail -2
res=$(mktemp -d)
BUDGET_S=${BUDGET_S:-550} OLD=.carry/old benchmarks/trains_gpu.sh "$res" "$PHASE"
tar -czf "$OUT/heap_$PHASE.tgz" -C "$res" .
