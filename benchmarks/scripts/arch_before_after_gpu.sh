#!/usr/bin/env bash
# Issue-12 check: rn50 at its defaults, before and after a change, against the bare PyTorch loop,
# alternated in one call (after, before, bare, twice), then precision=amp_static against its bare
# loop and profiler=pytorch, which exercise the option components on a GPU.
# Usage: benchmarks/scripts/arch_before_after_gpu.sh OUTDIR BEFORE_TREE   (from the repository root)
# BEFORE_TREE: a checkout of the earlier commit, e.g. `git archive 309cfef | tar -x -C /tmp/before`.
set -uo pipefail
out=${1:?output directory}; before=${2:?tree of the earlier commit}
mkdir -p "$out"; out=$(cd "$out" && pwd); before=$(cd "$before" && pwd); head=$(pwd)
export PYTHONUNBUFFERED=1
work=$(mktemp -d) && cd "$work"
run() {  # name, source tree, then overrides; the summary lands in OUTDIR as NAME.json
  local name=$1 src=$2; shift 2
  PYTHONPATH=$src timeout 300 python3 -m rn50 "$@" hydra.run.dir="$work/$name" > "$out/$name.log" 2>&1
  echo "$name exit $?"; cp "$work/$name/summary.json" "$out/$name.json" 2>/dev/null
  grep -a "images/sec (" "$out/$name.log" | tail -1
}
bare() {  # name, then rn50.baseline arguments
  local name=$1; shift
  PYTHONPATH=$head timeout 300 python3 -m rn50.baseline "$@" > "$out/$name.json" 2>/dev/null
  echo "$name: $(grep -o '"images_per_sec": [0-9.]*' "$out/$name.json")"
}
for i in 1 2; do
  run "after$i" "$head"
  run "before$i" "$before"
  bare "bare$i" --precision amp
done
run amp_static "$head" precision=amp_static precision.loss_scale=512
bare bare_amp_static --precision amp_static --loss-scale 512
run pytorch_profile "$head" profiler=pytorch
ls "$work/pytorch_profile"
