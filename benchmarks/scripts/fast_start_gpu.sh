#!/usr/bin/env bash
# Issues 11 and 12 on one GPU, in one call: start-up of a 1n1g run, a 6-point sweep's wall time
# against its measured time, one point alone against the same point inside the sweep, and
# rn50 against the bare loop at defaults, before (BEFORE=dir with the old rn50) and after.
# Usage: benchmarks/scripts/fast_start_gpu.sh OUTDIR   (from the repository root)
set -uo pipefail
out=${1:?output directory}
repo=$(pwd)
site=${PYTHONPATH:-}  # where the carried wheels were installed
export PYTHONPATH=$repo${site:+:$site} PYTHONUNBUFFERED=1
work=$(mktemp -d) && cd "$work"
el() { python3 -c "import sys,time;print(round(time.time()-float(sys.argv[1]),1))" "$1"; }
s() { python3 -c "import json,sys;print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$@"; }
{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c 'import torch,pytorch_lightning as pl,mlflow,hydra;print("torch",torch.__version__,"lightning",pl.__version__,"mlflow",mlflow.__version__,"hydra",hydra.__version__)'
  t0=$(date +%s.%N); python3 -m rn50 --help > /dev/null; echo "--help: $(el $t0) s"
} > "$out/env.txt" 2>&1
cat "$out/env.txt"

t0=$(date +%s.%N)
python3 -m rn50 hydra.run.dir="$work/one" > "$out/one.log" 2>&1
echo "1n1g defaults: command $(el $t0) s, startup $(s one/summary.json time/startup_s) s, $(s one/summary.json throughput/images_per_sec) img/s" | tee "$out/result.txt"
python3 -m rn50.baseline --precision amp > "$work/bare.json" 2>> "$out/one.log"
echo "bare amp bs256: $(tail -1 bare.json | python3 -c 'import json,sys;print(json.loads(sys.stdin.read())["images_per_sec"])') img/s" | tee -a "$out/result.txt"
if [ -n "${BEFORE:-}" ]; then
  t0=$(date +%s.%N)
  PYTHONPATH=$BEFORE${site:+:$site} python3 -m rn50 hydra.run.dir="$work/before" > "$out/before.log" 2>&1
  echo "before (e32cfd0) defaults: command $(el $t0) s, $(s before/summary.json throughput/images_per_sec) img/s" | tee -a "$out/result.txt"
fi

t0=$(date +%s.%N)
python3 -m rn50 --multirun data.batch_size=128,256 precision=amp,bf16,tf32 hydra.sweep.dir="$work/sweep" > "$out/sweep.log" 2>&1
echo "6-point sweep: command $(el $t0) s; $(grep '^sweep wall time' "$out/sweep.log")" | tee -a "$out/result.txt"
for point in "data.batch_size=256 precision=bf16" "data.batch_size=128 precision=tf32"; do
  python3 -m rn50 $point hydra.run.dir="$work/alone" > "$out/alone.log" 2>&1
  python3 - "$work" "$point" <<'PY' | tee -a "$out/result.txt"
import json, pathlib, sys
work, point = pathlib.Path(sys.argv[1]), sys.argv[2]
alone = json.loads((work / "alone" / "summary.json").read_text())
for f in (work / "sweep").glob("*/summary.json"):
    s = json.loads(f.read_text())
    if s["batch_size"] == alone["batch_size"] and s["precision"] == alone["precision"]:
        a, w = alone["throughput/images_per_sec"], s["throughput/images_per_sec"]
        print(f"{point}: alone {a:.1f} img/s (startup {alone['time/startup_s']:.1f} s), in sweep {w:.1f} "
              f"(startup {s['time/startup_s']:.1f} s), sweep/alone {w / a:.4f}")
PY
done
python3 - "$work" <<'PY' | tee -a "$out/result.txt"
import json, pathlib, sys
for f in sorted(pathlib.Path(sys.argv[1], "sweep").glob("*/summary.json")):
    s = json.loads(f.read_text())
    print(f"sweep point {f.parent.name}: bs{s['batch_size']} {s['precision']}: {s['throughput/images_per_sec']:.1f} img/s, "
          f"startup {s['time/startup_s']:.1f} s, warm-up {s['time/warmup_s']:.1f} s, measured {s['window/seconds_total']:.1f} s, wall {s['time/wall_s']:.1f} s")
PY
cp "$work/sweep/sweep_report.md" "$out/" 2>/dev/null
tar czf "$out/runs.tgz" -C "$work" --exclude='*.pt' one sweep 2>/dev/null
