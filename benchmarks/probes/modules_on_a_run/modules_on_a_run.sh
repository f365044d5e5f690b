#!/usr/bin/env bash
# Issue 45's measure: how many rn50 modules run code (a function of theirs is called) on one shrunk CPU run of
# `python -m rn50`, in the launcher and its rank together. Usage, from anywhere:
#   benchmarks/probes/modules_on_a_run/modules_on_a_run.sh TREE OUT
# TREE: a checkout of rn50 (e.g. `git archive a8871ae rn50 conf hydra_plugins | tar -x -C /tmp/old`); OUT: a new
# folder, which gets modules.txt (one module per line) and the run's log. Prints the count.
set -uo pipefail
tree=$(cd "${1:?tree}" && pwd); out=${2:?output folder}; here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$out"; mkdir -p "$out/trace"; out=$(cd "$out" && pwd); cd "$out"
RN50_TRACE_ROOT="$tree/rn50/" RN50_TRACE_OUT="$out/trace" PYTHONPATH="$here:$tree" python -m rn50 \
  dist.accelerator=cpu precision=fp32 model=resnet18 data.image_size=32 data.batch_size=4 bench.warmup_steps=1 \
  bench.steps=2 hydra.run.dir="$out/run" > "$out/log" 2>&1 || { echo "the run failed: $out/log"; exit 1; }
cat "$out"/trace/*.txt | sed "s#^$tree/##" | sort -u > "$out/modules.txt"
wc -l < "$out/modules.txt"
