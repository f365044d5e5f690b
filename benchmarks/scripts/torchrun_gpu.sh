#!/usr/bin/env bash
# Two torchrun "nodes" of 2 GPUs each on one 4-GPU host against dist=1n4g on the same host.
# Usage: benchmarks/scripts/torchrun_gpu.sh OUTDIR [ROUNDS] [OVERRIDES...]   (run from the repository root)
# Each round runs 1n4g (cluster=local) then 2 x 2 (cluster=torchrun), alternating to spread drift.
set -uo pipefail
out=${1:?output directory}; rounds=${2:-2}; shift $(( $# >= 2 ? 2 : 1 ))
repo=$(pwd)
export PYTHONPATH=$repo${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
work=$(mktemp -d) && cd "$work"
{ nvidia-smi --query-gpu=index,name,driver_version --format=csv; echo "cpus: $(nproc)"
  python3 -c 'import torch,pytorch_lightning as pl;print("torch",torch.__version__,"lightning",pl.__version__,"nccl",torch.cuda.nccl.version())'
} > "$out/env.txt" 2>&1
args=(bench.repeats=5 "$@")
for round in $(seq "$rounds"); do
  python3 -m rn50 dist=1n4g "${args[@]}" hydra.run.dir="$work/local-$round" > "$out/local-$round.log" 2>&1
  echo "round $round 1n4g exit $?"
  port=$((29400 + round))
  for node in 0 1; do
    # Each "node" sees its own two GPUs, as on two hosts.
    CUDA_VISIBLE_DEVICES=$((2 * node)),$((2 * node + 1)) python3 -m torch.distributed.run --nnodes=2 \
      --nproc-per-node=2 --rdzv-backend=c10d --rdzv-endpoint=127.0.0.1:$port --rdzv-id=gpu-$round \
      -m rn50 cluster=torchrun dist.nodes=2 dist.gpus_per_node=2 "${args[@]}" \
      > "$out/torchrun-$round-node$node.log" 2>&1 &
  done
  wait
  echo "round $round 2x2 torchrun done"
done
for f in local-*/summary.json outputs/*/torchrun-*/summary.json; do cp "$f" "$out/$(basename "$(dirname "$f")").json"; done
python3 - "$work" <<'PY' | tee "$out/result.txt"
import json, pathlib, statistics, sys
work = pathlib.Path(sys.argv[1])
rows = {"1n4g local": [], "2n2g torchrun": []}
runs = [("1n4g local", f) for f in work.glob("local-*/summary.json")]
runs += [("2n2g torchrun", f) for f in work.glob("outputs/*/torchrun-*/summary.json")]
for key, f in sorted(runs, key=lambda r: r[1].stat().st_mtime):
    s = json.loads(f.read_text())
    rows[key].append(s["throughput/images_per_sec"])
    print(f"{key}: {s['throughput/images_per_sec']:.1f} images/sec (mean {s['throughput/images_per_sec_mean']:.1f}), "
          f"gpu util {s.get('gpu/utilization_pct', float('nan')):.1f}%  {f.parent.name}")
a, b = statistics.median(rows["1n4g local"]), statistics.median(rows["2n2g torchrun"])
print(f"median over rounds: 1n4g {a:.1f}, 2n2g torchrun {b:.1f}, ratio {b / a:.4f}")
PY
