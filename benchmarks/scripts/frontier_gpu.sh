#!/usr/bin/env bash
# Issue-13 verification on one GPU, in one call of under 10 minutes: rn50 at its defaults,
# experiment=fastest, experiment=mlperf and data.batch_size=auto, and the bare PyTorch loop at the
# defaults and at the fastest settings (right after rn50's fastest run, so its compile finds inductor's cache warm),
# then a table of images/sec, rn50 / bare, images per joule and MFU.
# Usage: benchmarks/scripts/frontier_gpu.sh OUTDIR   (from the repository root, as core_gpu.sh)
# OUTDIR gets 4 files: env.txt, table.md, results.json, runs.tar.gz (every run's directory and log).
# BUDGET_S (default 560) bounds the whole call: a run that would pass it is cut short and reported.
set -uo pipefail
out=${1:?output directory}; mkdir -p "$out"; out=$(cd "$out" && pwd)
repo=$(pwd)
export PYTHONPATH=$repo${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
work=$(mktemp -d) && cd "$work"
deadline=$((SECONDS + ${BUDGET_S:-560}))
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv
  python3 -c 'import sys,torch,torchvision,pytorch_lightning as pl,mlflow,hydra;print("python",sys.version.split()[0],"torch",torch.__version__,"torchvision",torchvision.__version__,"lightning",pl.__version__,"mlflow",mlflow.__version__,"hydra",hydra.__version__,"cudnn",torch.backends.cudnn.version())'
  echo "git $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)"
} 2>&1 | tee "$out/env.txt"

limit() {  # seconds left for the next run, keeping 25 s for the table and the tarball
  echo $((deadline - SECONDS - 25))
}
rn50() {  # name, then overrides
  local name=$1; shift
  local t0=$SECONDS left; left=$(limit)
  if [ "$left" -lt 30 ]; then echo "$name: skipped, out of time" | tee "$name.log"; return; fi
  timeout "$left" python3 -m rn50 "$@" hydra.run.dir="$work/$name" > "$name.log" 2>&1
  echo "$name: exit $? in $((SECONDS - t0)) s: python -m rn50 $*"
}
bare() {  # name, then rn50.baseline arguments
  local name=$1; shift
  local t0=$SECONDS left; left=$(limit)
  if [ "$left" -lt 30 ]; then echo "$name: skipped, out of time" | tee "$name.log"; return; fi
  timeout "$left" python3 -m rn50.baseline "$@" > "$name.json" 2> "$name.log"
  echo "$name: exit $? in $((SECONDS - t0)) s: python -m rn50.baseline $*"
}

rn50 defaults
bare bare_defaults --precision amp
rn50 fastest experiment=fastest
bare bare_fastest --precision amp --batch-size 512 --compile --compile-mode reduce-overhead --autotune-pointwise --autotune-coordinate-descent
rn50 mlperf experiment=mlperf
rn50 auto data.batch_size=auto

python3 - "$work" "$out" <<'PY'
import json, pathlib, sys

work, out = map(pathlib.Path, sys.argv[1:])
runs = [("defaults", "python -m rn50"), ("fastest", "python -m rn50 experiment=fastest"),
        ("mlperf", "python -m rn50 experiment=mlperf"), ("auto", "python -m rn50 data.batch_size=auto")]


def last_line(path):
    lines = [l for l in path.read_text(errors="replace").splitlines() if l.strip()] if path.exists() else []
    errors = [l for l in lines if l.startswith("rn50: error:")]
    return (errors or lines or ["no output"])[-1][:300]


results = {}
for name, command in runs:
    summary = work / name / "summary.json"
    results[name] = json.loads(summary.read_text()) if summary.exists() else {"failed": last_line(work / f"{name}.log")}
    results[name]["command"] = command
bares = {"defaults": ("bare_defaults", "python -m rn50.baseline --precision amp"),
         "fastest": ("bare_fastest", "python -m rn50.baseline --precision amp --batch-size 512 --compile "
                                     "--compile-mode reduce-overhead --autotune-pointwise --autotune-coordinate-descent")}
for name, command in bares.values():
    lines = (work / f"{name}.json").read_text().splitlines() if (work / f"{name}.json").exists() else []
    results[name] = json.loads(lines[-1]) if lines else {"failed": last_line(work / f"{name}.log")}
    results[name]["command"] = command
bare = results["bare_fastest"]
fast = results["fastest"]
if "images_per_sec" in bare and "model/gflops_per_image" in fast and "mfu/peak_tflops_per_device" in fast:
    tflops = bare["images_per_sec"] * fast["model/gflops_per_image"] / 1e3
    bare["mfu_pct"] = 100.0 * tflops / fast["mfu/peak_tflops_per_device"]


def num(value, fmt):
    return "-" if value is None else format(value, fmt)


rows = ["| run | batch | images/sec | rn50 / bare | images/J | J/image | MFU % | GPU util % | power W |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
for name, r in results.items():
    if "failed" in r:
        rows.append(f"| `{r['command']}` | - | failed: {r['failed']} | - | - | - | - | - | - |")
        continue
    ips = r.get("throughput/images_per_sec", r.get("images_per_sec"))
    reference = results.get(bares[name][0], {}) if name in bares else {}
    ratio = ips / reference["images_per_sec"] if "images_per_sec" in reference else None
    ipj = r.get("energy/images_per_joule", r.get("images_per_joule"))
    rows.append(f"| `{r['command']}` | {r.get('batch_size', '-')} | {num(ips, '.1f')} | {num(ratio, '.3f')} | "
                f"{num(ipj, '.2f')} | {num(1 / ipj if ipj else None, '.4f')} | {num(r.get('mfu_pct'), '.2f')} | "
                f"{num(r.get('gpu/utilization_pct'), '.1f')} | {num(r.get('gpu0/power_w'), '.0f')} |")
probes = {k: v for k, v in results["auto"].items() if k.startswith("batch_search/")}
table = "\n".join(rows) + "\n"
if probes:
    table += "\ndata.batch_size=auto: " + ", ".join(f"{k.removeprefix('batch_search/')}={v:.1f}" for k, v in sorted(probes.items())) + "\n"
(out / "table.md").write_text(table)
(out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
print(table)
PY
tar czf "$out/runs.tar.gz" -C "$work" --exclude='*.pt' .
ls -la "$out"
