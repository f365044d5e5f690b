#!/usr/bin/env bash
# Profilers on one GPU: NVTX on and off (its cost), profiler=pytorch and profiler=ncu under amp and fp32.
# Usage: benchmarks/scripts/profile_gpu.sh OUTDIR [PART...]   (run from the repository root; ncu needs the
# GPU's hardware counters). PARTs: pytorch, ncu, nvtx (default: all three; one call may not fit them).
set -uo pipefail
out=${1:?output directory}; shift
parts=${*:-pytorch ncu nvtx}
repo=$(pwd)
export PYTHONPATH=$repo${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -n 1)
work=$(mktemp -d) && cd "$work"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv; echo "cpus: $(nproc)"
  "$ncu" --version | tail -n 1
  python3 -c 'import torch,pytorch_lightning as pl;print("torch",torch.__version__,"lightning",pl.__version__)'
} > "$out/env.txt" 2>&1
run() {  # NAME OVERRIDES...: one rn50 run, its log and files kept under OUTDIR/NAME
  local name=$1; shift
  python3 -m rn50 "$@" hydra.run.dir="$work/$name" > "$out/$name.log" 2>&1
  echo "$name: exit $? $(grep -o '[0-9.]* images/sec (' "$out/$name.log" | head -n 1)"
  mkdir -p "$out/$name"
  cp "$work/$name"/{summary.json,kernels.csv,ncu_kernels.csv,ncu.log} "$out/$name/" 2>/dev/null
}
for part in $parts; do
  case $part in
    pytorch|ncu) for precision in amp fp32; do
                   run $part-$precision precision=$precision profiler=$part profiler.executable="$ncu"; done ;;
    nvtx) for round in 1 2; do  # NVTX's cost: alternate off and on
            run nvtx-off-$round profiler.nvtx=false bench.repeats=5
            run nvtx-on-$round profiler.nvtx=true bench.repeats=5
          done ;;
  esac
done
cp mlflow.db "$out/"
python3 - "$out" <<'PY' | tee "$out/result.txt"
import json, pathlib, statistics, sys
from mlflow.tracking import MlflowClient
out = pathlib.Path(sys.argv[1])
client = MlflowClient(f"sqlite:///{out}/mlflow.db")
def metrics(name):  # the MLflow run's metrics: ncu's are logged after summary.json is written
    f = out / name / "summary.json"
    return client.get_run(json.loads(f.read_text())["run_id"]).data.metrics if f.exists() else {}
ips = lambda n: metrics(n).get("throughput/images_per_sec", float("nan"))
off = statistics.median([ips(f"nvtx-off-{r}") for r in (1, 2)])
on = statistics.median([ips(f"nvtx-on-{r}") for r in (1, 2)])
print(f"nvtx off {off:.1f}, on {on:.1f} images/sec; on/off {on / off:.4f}")
for name in ("pytorch-amp", "pytorch-fp32", "ncu-amp", "ncu-fp32"):
    m = metrics(name)
    keys = sorted(k for k in m if k.startswith(("profile/", "ncu/")))
    print(name, f"{m.get('throughput/images_per_sec', float('nan')):.1f} images/sec,",
          f"NVML util {m.get('gpu/utilization_pct', float('nan')):.1f}%,",
          ", ".join(f"{k}={m[k]:.2f}" for k in keys))
PY
