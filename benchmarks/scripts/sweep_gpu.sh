#!/usr/bin/env bash
# A multirun on a multi-GPU host; the sweep's report files and a log land in OUTDIR.
# Usage: benchmarks/scripts/sweep_gpu.sh OUTDIR SWEEP-OVERRIDES...   (run from the repository root)
# e.g.   benchmarks/scripts/sweep_gpu.sh $OUT dist=1n1g,1n2g,1n4g data.batch_size=128,256,4096 bench.repeats=5
set -uo pipefail
out=${1:?output directory}; shift
repo=$(pwd)
export PYTHONPATH=$repo${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
work=$(mktemp -d) && cd "$work"
{ nvidia-smi --query-gpu=index,name,driver_version --format=csv; nvidia-smi topo -m; echo "cpus: $(nproc)"
  python3 -c 'import torch,pytorch_lightning as pl;print("torch",torch.__version__,"lightning",pl.__version__,"nccl",torch.cuda.nccl.version())'
} > "$out/env.txt" 2>&1
# The bare PyTorch DDP loop at each GPU count named in BARE_GPUS (e.g. "1 2 4"), same settings as rn50's defaults.
for n in ${BARE_GPUS:-}; do
  python3 -m torch.distributed.run --standalone --nproc-per-node "$n" -m rn50.baseline --repeats 5 2>/dev/null | tail -n 1 >> "$out/bare.jsonl"
done
python3 -m rn50 --multirun "$@" hydra.sweep.dir="$work/sweep" > "$out/sweep.log" 2>&1
echo "multirun exit status: $?" | tee -a "$out/sweep.log"
cp sweep/sweep_report.* sweep/*.png "$out/"
grep -E "rn50: error|images/sec \(" "$out/sweep.log" | cut -c1-300
cat sweep/sweep_report.md
