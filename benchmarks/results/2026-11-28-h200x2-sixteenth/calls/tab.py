"""Ad-hoc table of this session's one-run summaries (g: throughput runs; h: train=accuracy epochs)."""
import glob
import json
import sys
root = sys.argv[1]
K = ["throughput/images_per_sec", "data/wait_pct", "gpu/utilization_pct", "step_time/median_ms", "step_time/p90_ms",
     "cpu/cores_per_device", "host/busy_cores", "gpu/jpeg_utilization_pct", "gpu/sm_clock_mhz_min", "gpu/power_w",
     "train/loss_first", "train/loss_last", "train/skipped_steps_window"]
print("| run | " + " | ".join(k.split("/")[-1] for k in K) + " |")
for p in sorted(glob.glob(f"{root}/g/*.json")):
    d = json.load(open(p))
    print(f"| {p.split('/')[-1][:-5]} | " + " | ".join(f"{d[k]:.4g}" if isinstance(d.get(k), (int, float)) else "-" for k in K) + " |")
for p in sorted(glob.glob(f"{root}/h/*.epochs.jsonl")):
    print(p.split("/")[-1])
    for line in open(p):
        e = json.loads(line)
        print("  ", {k: (round(v, 4) if isinstance(v, float) else v) for k, v in e.items()})
