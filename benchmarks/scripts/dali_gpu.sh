#!/usr/bin/env bash
# Issue-14 verification: data=dali against data=synthetic at rn50's defaults (amp, batch 256, eager)
# and at experiment=fastest, each data.dali lever alone at the fastest settings, the bare DALI loop
# (with training and --decode-only), every GPU of the host (dist=1nNg: synthetic, dali, imagefolder),
# each data.dali lever alone on every GPU, and data=imagefolder at 8, 16 and 28 DataLoader workers; a
# table of images/sec, x synthetic, data wait and CPU use (cpu/cores_per_device, host/busy_cores) comes
# last. THREADS=1 adds each run's CPU use by process and thread 30 s after its start, for 5 s
# (thread_cpu.py, OUTDIR/NAME.threads).
# Usage: benchmarks/scripts/dali_gpu.sh OUTDIR [PHASES]   (from the repository root, DALI installed)
# PHASES (default all): any of defaults fastest levers bare dist distlevers imagefolder, to split the work
# over several calls into the same OUTDIR; the table covers every result OUTDIR holds.
# BUDGET_S (default 560) bounds the call: a run that would pass it is skipped and reported. All
# phases are 27 runs, more than one 10-minute call: e.g. "defaults fastest bare", then "levers",
# then "dist imagefolder", each call regenerating the same tree (same seed) first. LEVERS (a
# space-separated list of data.dali settings, "bf16" for the bf16 runs) narrows the levers phase;
# DIST_LEVERS the distlevers phase (each lever alone at dist=1nNg, N the host's GPUs); DIST_DATA (default
# "synthetic dali imagefolder") the dist phase's runs.
# IMAGES_PER_CLASS (default 100): 100 classes of it, 10,000 JPEGs of ~112 KB, an epoch every 39
# steps at batch 256, so every measured window crosses epoch ends.
set -uo pipefail
out=${1:?output directory}; mkdir -p "$out"; out=$(cd "$out" && pwd)
phases=${2:-all}
repo=$(pwd)
export PYTHONPATH=$repo${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
work=$(mktemp -d) && cd "$work"
deadline=$((SECONDS + ${BUDGET_S:-560}))
{
  nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,power.limit --format=csv
  echo "cpus: $(nproc)"
  python3 -c 'import torch,torchvision,pytorch_lightning as pl,nvidia.dali as d;print("torch",torch.__version__,"torchvision",torchvision.__version__,"lightning",pl.__version__,"dali",d.__version__)'
  echo "git $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)"
} 2>&1 | tee -a "$out/env.txt"
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
tree=$work/imagenet
python3 -m rn50.fake_imagenet "$tree" --classes 100 --train-per-class "${IMAGES_PER_CLASS:-100}" \
  --val-per-class 1 2>&1 | tail -n 1 | tee -a "$out/fake_imagenet.txt"

want() { [ "$phases" = all ] || [[ " $phases " == *" $1 "* ]]; }
limit() { echo $((deadline - SECONDS - 20)); }  # seconds left, keeping 20 for the table
rn50() {  # name, then overrides; its summary.json lands in OUTDIR as NAME.json
  local name=$1; shift
  local t0=$SECONDS left; left=$(limit)
  if [ "$left" -lt 40 ]; then echo "$name: skipped, out of time" | tee "$out/$name.skipped"; return; fi
  [ "${THREADS:-0}" = 1 ] && python3 "$repo/benchmarks/scripts/thread_cpu.py" --after 30 --for 5 > "$out/$name.threads" &
  timeout "$left" python3 -m rn50 "$@" hydra.run.dir="$work/$name" > "$out/$name.log" 2>&1
  echo "$name: exit $? in $((SECONDS - t0)) s: python -m rn50 $*"
  cp "$work/$name/summary.json" "$out/$name.json" 2>/dev/null
}
bare() {  # name, then rn50.baseline arguments; its JSON line lands in OUTDIR as NAME.json
  local name=$1; shift
  local t0=$SECONDS left; left=$(limit)
  if [ "$left" -lt 40 ]; then echo "$name: skipped, out of time" | tee "$out/$name.skipped"; return; fi
  timeout "$left" python3 -m rn50.baseline "$@" 2> "$out/$name.log" | tail -n 1 > "$out/$name.json"
  echo "$name: exit ${PIPESTATUS[0]} in $((SECONDS - t0)) s: python -m rn50.baseline $*"
}
dali=(data=dali data.root="$tree")
fastest=(experiment=fastest)

if want defaults; then
  rn50 defaults_synthetic
  rn50 defaults_dali "${dali[@]}"
  rn50 defaults_imagefolder data=imagefolder data.root="$tree"
fi
if want fastest; then
  rn50 fastest_synthetic "${fastest[@]}"
  rn50 fastest_dali "${fastest[@]}" "${dali[@]}"
fi
if want levers; then  # one lever at a time at the fastest settings, where DALI fell furthest behind
  # MLPerf-sized nvJPEG buffers and hardware-decoder hints (NVIDIA's ResNet-50 DALI loader).
  for lever in ${LEVERS:-hw_decoder_load=0.99 hw_decoder_load=0 prefetch_queue_depth=3 prefetch_queue_depth=4 \
      num_threads=4 num_threads=12 device_memory_padding=211025920 host_memory_padding=140544512 \
      preallocate_width_hint=5980,preallocate_height_hint=6430 stream_outputs=true}; do
    [ "$lever" = bf16 ] && continue
    rn50 "lever_${lever//[=,]/_}" "${fastest[@]}" "${dali[@]}" $(tr , '\n' <<< "$lever" | sed 's/^/data.dali./')
  done
  # bf16 feeds the model float32 by default; float16 halves what the pipeline writes.
  [ -n "${LEVERS:-}" ] && [[ " $LEVERS " != *" bf16 "* ]] || {
  rn50 bf16_synthetic precision=bf16
  rn50 bf16_dali precision=bf16 "${dali[@]}"
  rn50 bf16_dali_float16 precision=bf16 "${dali[@]}" data.dali.output_dtype=float16
  }
fi
if want bare; then
  bare bare_synthetic --precision amp
  bare bare_dali --precision amp --data-root "$tree"
  # experiment=fastest's own data.dali settings: rn50.baseline composes plain data=dali
  bare bare_dali_fastest --precision amp --batch-size 512 --compile --compile-mode reduce-overhead --data-root "$tree" \
    --dali num_threads=null --dali hw_decoder_load=0.65 --dali cpu_decode_share=0.5
  bare bare_decode_only --precision amp --data-root "$tree" --decode-only
  bare bare_decode_only_hw099 --precision amp --data-root "$tree" --decode-only --dali hw_decoder_load=0.99
fi
if want dist; then
  if [ "$gpus" -ge 2 ]; then  # each rank reads its own shard of the 10,000 images
    want_data() { [[ " ${DIST_DATA:-synthetic dali imagefolder} " == *" $1 "* ]]; }
    want_data synthetic && rn50 "dist${gpus}_synthetic" "dist=1n${gpus}g"
    want_data dali && rn50 "dist${gpus}_dali" "dist=1n${gpus}g" "${dali[@]}"
    want_data imagefolder && rn50 "dist${gpus}_imagefolder" "dist=1n${gpus}g" data=imagefolder data.root="$tree"
  else
    echo "dist: skipped, $gpus GPU(s)" | tee "$out/dist.skipped"
  fi
fi
if want distlevers; then  # one lever at a time on every GPU of the host, against data=dali's defaults (the
  # hardware decoder, no CPU share, 6 threads, chosen so on 4 H100s in issue 44); the dist phase's
  # dist<N>_synthetic and dist<N>_dali are their references; the first lever is the defaults of before
  if [ "$gpus" -ge 2 ]; then
    for lever in ${DIST_LEVERS:-num_threads=12,hw_decoder_load=0,cpu_decode_share=0.25 num_threads=4 num_threads=12 \
        hw_decoder_load=0.65 cpu_decode_share=0.1}; do
      rn50 "dist${gpus}_lever_${lever//[=,.]/_}" "dist=1n${gpus}g" "${dali[@]}" \
        $(tr , '\n' <<< "$lever" | sed 's/^/data.dali./')
    done
  fi
fi
if want imagefolder; then
  for n in 8 16 28; do rn50 "imagefolder_w$n" data=imagefolder data.root="$tree" data.num_workers=$n; done
fi

python3 - "$out" <<'PY'
import json, pathlib, sys

out = pathlib.Path(sys.argv[1])


def load(name):
    path = out / f"{name}.json"
    try:
        return json.loads(path.read_text().strip().splitlines()[-1])
    except (OSError, IndexError, ValueError):
        return None


def ips(r):
    return None if r is None else r.get("throughput/images_per_sec", r.get("images_per_sec"))


# Each run against the synthetic run of the same settings: PREFIX_synthetic, where PREFIX is the part of
# its name before the first "_" (defaults, fastest, bf16, distN, bare), except for these.
reference = {"lever": "fastest_synthetic", "imagefolder": "defaults_synthetic"}
order = ["defaults", "fastest", "lever", "bf16", "dist", "imagefolder", "bare"]
names = sorted({p.stem for pattern in ("*.json", "*.log", "*.skipped") for p in out.glob(pattern)},
               key=lambda n: (next((i for i, o in enumerate(order) if n.startswith(o)), 99), n))
rows = ["| run | images/sec | x synthetic | data wait % | GPU util % | step median ms | CPU cores per GPU | host busy cores |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |"]
for name in names:
    prefix = name.split("_")[0]
    r, base = load(name), ips(load(reference.get(prefix, f"{prefix}_synthetic")))
    if name.startswith("bare_dali_fastest"):
        base = None  # no bare synthetic run at batch 512 compiled here: frontier_gpu.sh has one
    if ips(r) is None:
        log = out / f"{name}.log"
        lines = [l for l in log.read_text(errors="replace").splitlines() if l.strip()] if log.exists() else []
        why = "skipped" if (out / f"{name}.skipped").exists() else "failed: " + (lines or ["no output"])[-1][:120]
        rows.append(f"| {name} | {why} | - | - | - | - | - | - |")
        continue
    fmt = lambda v, f: "-" if v is None else format(v, f)  # noqa: E731
    rows.append(f"| {name} | {ips(r):.1f} | {fmt(ips(r) / base if base else None, '.3f')} | "
                f"{fmt(r.get('data/wait_pct'), '.1f')} | {fmt(r.get('gpu/utilization_pct'), '.1f')} | "
                f"{fmt(r.get('step_time/median_ms'), '.2f')} | {fmt(r.get('cpu/cores_per_device'), '.1f')} | "
                f"{fmt(r.get('host/busy_cores'), '.1f')} |")
table = "\n".join(rows) + "\n"
(out / "table.md").write_text(table)
print(table)
PY
