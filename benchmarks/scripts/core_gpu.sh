#!/usr/bin/env bash
# Issue-2 verification on one GPU: rn50 at defaults, rn50 bf16+compile, and the bare
# PyTorch loop with the same settings, all in one session so their ratio is fair.
# Usage: benchmarks/scripts/core_gpu.sh OUTDIR   (run from the repository root)
set -euo pipefail
out=${1:?output directory}
repo=$(pwd)
export PYTHONPATH=$repo${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
work=$(mktemp -d) && cd "$work"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv | tee "$out/gpu.csv"
python3 -c 'import torch,torchvision,pytorch_lightning as pl,mlflow,hydra;print("torch",torch.__version__,"torchvision",torchvision.__version__,"lightning",pl.__version__,"mlflow",mlflow.__version__,"hydra",hydra.__version__,"cudnn",torch.backends.cudnn.version())' | tee "$out/versions.txt"
python3 -m rn50.baseline --precision amp | tee "$out/baseline_amp.json"
python3 -m rn50 hydra.run.dir="$work/run_amp"
python3 -m rn50 precision=bf16 model.compile=true hydra.run.dir="$work/run_bf16_compile"
python3 -m rn50.baseline --precision bf16 --compile | tee "$out/baseline_bf16_compile.json"
python3 -m rn50.baseline --precision amp | tee "$out/baseline_amp_2.json"
cp run_amp/summary.json "$out/rn50_amp.json"; cp run_bf16_compile/summary.json "$out/rn50_bf16_compile.json"
cp run_amp/gpu_telemetry.csv "$out/gpu_telemetry_amp.csv"
python3 - "$out" <<'PY'
import json, sys, pathlib
o = pathlib.Path(sys.argv[1]); j = lambda n: json.loads((o / n).read_text().strip().splitlines()[-1])
base = [j("baseline_amp.json")["images_per_sec"], j("baseline_amp_2.json")["images_per_sec"]]
for name, b in (("amp", sum(base) / 2), ("bf16_compile", j("baseline_bf16_compile.json")["images_per_sec"])):
    r = j(f"rn50_{name}.json")
    print(f"{name}: rn50 {r['throughput/images_per_sec']:.1f} img/s, bare {b:.1f}, ratio {r['throughput/images_per_sec']/b:.3f}, "
          f"util {r.get('gpu/utilization_pct', float('nan')):.1f}%, mfu {r.get('mfu_pct', float('nan')):.2f}%, "
          f"step median {r['step_time/median_ms']:.2f} ms p90 {r['step_time/p90_ms']:.2f} ms, power {r.get('gpu0/power_w', float('nan')):.0f} W")
print("bare amp runs:", [round(b, 1) for b in base])
PY
