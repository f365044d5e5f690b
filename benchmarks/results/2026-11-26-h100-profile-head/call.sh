#!/usr/bin/env bash
# Where experiment=fastest's step goes (issue 30; asked for an H200, ran on an H100), with the proof that the run trained,
# and the card's power, clocks and clock-event reasons sampled through the run.
set -u
cd "$(dirname "$0")/.."
t0=$SECONDS
python3 -m pip install -q --no-index --find-links .carry/wh rn50 2>&1 | tail -2
echo "install at $((SECONDS-t0)) s"
{ date -u +%FT%TZ
  nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
  echo "cpus: $(nproc)"
  python3 -c 'import torch,torchvision,pytorch_lightning as pl;print("torch",torch.__version__,"cudnn",torch.backends.cudnn.version(),"torchvision",torchvision.__version__,"lightning",pl.__version__)'
} 2>&1 | tee "$OUT/env.txt"
nvidia-smi --query-gpu=timestamp,power.draw,clocks.sm,clocks.mem,temperature.gpu,utilization.gpu,clocks_event_reasons.sw_power_cap,clocks_event_reasons.hw_slowdown,clocks_event_reasons.sw_thermal_slowdown --format=csv -lms 500 > "$OUT/smi.csv" 2>&1 &
smi=$!
mkdir -p /tmp/w && cd /tmp/w
PYTHONUNBUFFERED=1 timeout $((570 - SECONDS)) python3 -m rn50 experiment=fastest profiler=pytorch hydra.run.dir=/tmp/w/fastest_prof > "$OUT/fastest_prof.log" 2>&1
echo "fastest_prof rc=$? at $((SECONDS-t0)) s"
kill $smi
cp /tmp/w/fastest_prof/summary.json "$OUT/fastest_prof.json" 2>/dev/null
find /tmp/w/fastest_prof -name "*.csv" -size -2M | xargs -I{} cp {} "$OUT/" 2>/dev/null
grep -E "images/sec \(" "$OUT/fastest_prof.log" | tail -1
python3 - "$OUT/fastest_prof.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for k in sorted(d):
    if k.startswith(("profile/", "train/", "energy/", "gpu/", "mfu", "throughput/images_per_sec")):
        print(k, d[k])
PY
