#!/usr/bin/env bash
# Issue-4 verification on one GPU: about 10,000 fake ImageNet JPEGs, then data=synthetic,
# data=dali and data=imagefolder with the same model, precision and batch, in one call.
# Usage: benchmarks/scripts/data_gpu.sh OUTDIR   (run from the repository root, DALI installed)
set -uo pipefail
out=${1:?output directory}
repo=$(pwd)
export PYTHONPATH=$repo${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
work=$(mktemp -d) && cd "$work"
{ nvidia-smi --query-gpu=name,driver_version --format=csv; echo "cpus: $(nproc)"
  python3 -c 'import torch,torchvision,nvidia.dali as d;print("torch",torch.__version__,"torchvision",torchvision.__version__,"dali",d.__version__)'
} > "$out/env.txt" 2>&1
python3 -m rn50.fake_imagenet "$work/imagenet" --classes 100 --train-per-class 100 --val-per-class 2 2>&1 | tail -n 1 | tee "$out/fake_imagenet.txt"
for data in synthetic dali imagefolder; do
  workers=8; [ $data = imagefolder ] && workers=$(( $(nproc) - 2 ))
  python3 -m rn50 data=$data data.root="$work/imagenet" data.num_workers=$workers hydra.run.dir="$work/run_$data" > "$out/$data.log" 2>&1
  echo "$data exit $?"; cp "$work/run_$data/summary.json" "$out/$data.json" 2>/dev/null
done
python3 - "$out" <<'PY'
import json, sys, pathlib
o = pathlib.Path(sys.argv[1]); runs = {d: json.loads((o / f"{d}.json").read_text()) for d in ("synthetic", "dali", "imagefolder") if (o / f"{d}.json").exists()}
base = runs["synthetic"]["throughput/images_per_sec"]
for d, r in runs.items():
    print(f"{d}: {r['throughput/images_per_sec']:.1f} img/s ({r['throughput/images_per_sec']/base:.3f} x synthetic), "
          f"data wait {r['data/wait_pct']:.1f}%, GPU util {r.get('gpu/utilization_pct', float('nan')):.1f}%, step median {r['step_time/median_ms']:.2f} ms")
PY
