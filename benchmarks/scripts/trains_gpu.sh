#!/usr/bin/env bash
# Issue-27 verification on one GPU: every figure again, from runs that prove they trained, beside
# the code before the fix (OLD, a source tree of commit 467df4c whose amp runs never took a step)
# and the bare loop, in one call each, so every ratio is between runs on the same card.
# Usage: benchmarks/scripts/trains_gpu.sh OUTDIR PHASES   (from the repository root, rn50's deps installed)
# PHASES: any of tests core fair precisions presets fastest dali. OLD (default .carry/old) is the old
# tree; DATA (default /tmp/imagenet) the fake ImageNet the dali phase makes if it is missing.
# BUDGET_S (default 560) bounds the call: a run that would pass it is skipped and reported.
# A table of every result OUTDIR holds comes last: images/sec, the loss across the window, the
# steps skipped in it, and the ratios new/old and rn50/bare.
set -uo pipefail
out=${1:?output directory}; mkdir -p "$out"; out=$(cd "$out" && pwd)
phases=${2:?phases}
repo=$(pwd)
old=$(cd "${OLD:-.carry/old}" 2>/dev/null && pwd || echo "")
export PYTHONUNBUFFERED=1
work=$(mktemp -d) && cd "$work"
deadline=$((SECONDS + ${BUDGET_S:-560}))
{
  date -u +%FT%TZ
  nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
  echo "cpus: $(nproc)"
  python3 -c 'import torch,torchvision,pytorch_lightning as pl;print("torch",torch.__version__,"cudnn",torch.backends.cudnn.version(),"torchvision",torchvision.__version__,"lightning",pl.__version__)'
} 2>&1 | tee -a "$out/env.txt"

want() { [[ " $phases " == *" $1 "* ]]; }
limit() { echo $((deadline - SECONDS - 15)); }  # seconds left, keeping 15 for the table
tree() { [ "$1" = old ] && echo "$old" || echo "$repo"; }
rn50() {  # new|old, name, then overrides; its summary.json lands in OUTDIR as NAME.json
  local code=$1 name=$2; shift 2
  local t0=$SECONDS left; left=$(limit)
  if [ "$left" -lt 40 ]; then echo "$name: skipped, out of time" | tee "$out/$name.skipped"; return; fi
  if [ "$code" = old ] && [ -z "$old" ]; then echo "$name: skipped, no old tree" | tee "$out/$name.skipped"; return; fi
  PYTHONPATH=$(tree "$code") timeout "$left" python3 -m rn50 "$@" hydra.run.dir="$work/$name" > "$out/$name.log" 2>&1
  echo "$name: exit $? in $((SECONDS - t0)) s: python -m rn50 $*"
  cp "$work/$name/summary.json" "$out/$name.json" 2>/dev/null
}
bare() {  # new|old, name, then rn50.baseline arguments; its JSON line lands in OUTDIR as NAME.json
  local code=$1 name=$2; shift 2
  local t0=$SECONDS left; left=$(limit)
  if [ "$left" -lt 40 ]; then echo "$name: skipped, out of time" | tee "$out/$name.skipped"; return; fi
  if [ "$code" = old ] && [ -z "$old" ]; then echo "$name: skipped, no old tree" | tee "$out/$name.skipped"; return; fi
  PYTHONPATH=$(tree "$code") timeout "$left" python3 -m rn50.baseline "$@" 2> "$out/$name.log" | tail -n 1 > "$out/$name.json"
  echo "$name: exit ${PIPESTATUS[0]} in $((SECONDS - t0)) s: python -m rn50.baseline $*"
}

if want tests; then  # the gpu-marked tests, with CUDA's fused kernels
  t0=$SECONDS
  (cd "$repo" && timeout "$(limit)" python3 -m pytest -p no:cacheprovider -n 0 -m gpu -q -rs tests/unit/test_trained.py tests/e2e/test_trained_runs.py \
    > "$out/pytest_gpu.log" 2>&1)
  echo "pytest -m gpu tests/unit/test_trained.py tests/e2e/test_trained_runs.py: exit $? in $((SECONDS - t0)) s"; tail -n 3 "$out/pytest_gpu.log"
fi
if want core; then  # defaults: old and new, alternating, each beside its bare loop
  bare old bare_old_amp --precision amp
  bare new bare_amp --precision amp
  rn50 old old_defaults
  rn50 new defaults
  rn50 new defaults_foreach optim.fused=false
  rn50 old old_defaults_2
  rn50 new defaults_2
  bare new bare_amp_2 --precision amp
  bare old bare_old_amp_2 --precision amp
fi
if want fair; then  # old and new where the old code trained too: amp_static's 1024 and bf16 never overflow
  for p in amp_static bf16; do
    rn50 old "old_fair_$p" precision=$p
    rn50 new "fair_$p" precision=$p
  done
fi
if want precisions; then
  for p in bf16 amp_static tf32 fp32; do
    rn50 new "defaults_$p" precision=$p
    bare new "bare_$p" --precision $p
  done
fi
if want presets; then  # as users run them, every key of the preset
  rn50 new mlperf experiment=mlperf
  rn50 old old_mlperf experiment=mlperf
  rn50 new auto data.batch_size=auto
  rn50 new bf16_compiled precision=bf16 model.compile=true
fi
if want fastest; then  # kernel tuning on: the first compile takes minutes, the next ones read the cache
  rn50 new fastest experiment=fastest
  bare new bare_fastest --batch-size 512 --compile --compile-mode reduce-overhead --autotune-pointwise \
    --autotune-coordinate-descent
  rn50 old old_fastest experiment=fastest
  rn50 new fastest_2 experiment=fastest
fi
if want dali; then  # data=dali at the defaults and at experiment=fastest with its kernel tuning, as users run it
  data=${DATA:-/tmp/imagenet}
  [ -d "$data/train" ] || python3 -m rn50.fake_imagenet "$data" --classes 100 --train-per-class 100 \
    --val-per-class 1 2>&1 | tail -n 1 | tee -a "$out/fake_imagenet.txt"
  rn50 new dali_defaults data=dali data.root="$data"
  rn50 new dali_synthetic
  rn50 new dali_fastest experiment=fastest data=dali data.root="$data"
  rn50 new dali_fastest_synthetic experiment=fastest
fi

python3 - "$out" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
def load(name):
    try:
        return json.loads((out / f"{name}.json").read_text().strip().splitlines()[-1])
    except (OSError, IndexError, ValueError):
        return None
def ips(r):
    return r and (r.get("throughput/images_per_sec") or r.get("images_per_sec"))
def proof(r):
    if r is None:
        return "-"
    if "train/loss_first" in r:
        return (f"{r['train/loss_first']:.3g} -> {r['train/loss_last']:.3g}, skipped {r.get('train/skipped_steps_window', '-')}"
                f" in window ({r.get('train/skipped_steps', '-')} in all), scale {r.get('train/loss_scale', '-')}")
    if "loss_first" in r:
        return f"{r['loss_first']:.3g} -> {r['loss_last']:.3g}, skipped {r.get('skipped_steps_window', '-')} in window"
    return "not recorded (old code)"
print("| run | images/sec | loss across the window, skipped steps, scale | MFU % | images/J |")
print("| --- | --- | --- | --- | --- |")
for path in sorted(out.glob("*.json")):
    r = load(path.stem)
    if r is None:
        print(f"| {path.stem} | no result | | | |"); continue
    print(f"| {path.stem} | {ips(r) or float('nan'):,.1f} | {proof(r)} | {r.get('mfu_pct', float('nan')):.1f} "
          f"| {r.get('energy/images_per_joule', r.get('images_per_joule')) or float('nan'):.2f} |")
ratios = [("defaults / old_defaults", "defaults", "old_defaults"), ("defaults_2 / old_defaults_2", "defaults_2", "old_defaults_2"),
          ("bare_amp / bare_old_amp", "bare_amp", "bare_old_amp"), ("defaults / bare_amp", "defaults", "bare_amp"),
          ("defaults_2 / bare_amp_2", "defaults_2", "bare_amp_2"), ("defaults_foreach / defaults", "defaults_foreach", "defaults"),
          ("fastest / old_fastest", "fastest", "old_fastest"), ("fastest / bare_fastest", "fastest", "bare_fastest"), ("fastest_2 / bare_fastest", "fastest_2", "bare_fastest"),
          ("mlperf / old_mlperf", "mlperf", "old_mlperf"), ("dali_defaults / dali_synthetic", "dali_defaults", "dali_synthetic"),
          ("dali_fastest / dali_fastest_synthetic", "dali_fastest", "dali_fastest_synthetic")]
ratios += [(f"fair_{p}{n} / old_fair_{p}{n}", f"fair_{p}{n}", f"old_fair_{p}{n}") for p in ("amp_static", "bf16")
           for n in ("",)]
ratios += [(f"defaults_{p} / bare_{p}", f"defaults_{p}", f"bare_{p}") for p in ("bf16", "amp_static", "tf32", "fp32")]
for label, a, b in ratios:
    if ips(load(a)) and ips(load(b)):
        print(f"{label}: {ips(load(a)) / ips(load(b)):.3f}")
PY
