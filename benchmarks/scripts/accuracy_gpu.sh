#!/usr/bin/env bash
# Issue-15 verification on one GPU: train=accuracy against train=throughput with the same
# settings (rn50's defaults, data=dali on python -m rn50.fake_imagenet JPEGs), 2 short epochs.
# The table gives each epoch's training images/sec against the throughput run, and its seconds
# of training, evaluation and checkpoint write.
# Usage: benchmarks/scripts/accuracy_gpu.sh OUTDIR   (from the repository root, DALI installed)
# TRAIN_PER_CLASS (default 400) and VAL_PER_CLASS (default 50), 100 classes of each: 40,000
# training JPEGs, an epoch of 156 steps at batch 256, and 5,000 to evaluate.
set -uo pipefail
out=${1:?output directory}; mkdir -p "$out"; out=$(cd "$out" && pwd)
repo=$(pwd)
export PYTHONPATH=$repo${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
work=$(mktemp -d) && cd "$work"
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv
  echo "cpus: $(nproc)"
  python3 -c 'import torch,torchvision,pytorch_lightning as pl,nvidia.dali as d;print("torch",torch.__version__,"torchvision",torchvision.__version__,"lightning",pl.__version__,"dali",d.__version__)'
  echo "git $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)"
} 2>&1 | tee "$out/env.txt"
tree=$work/imagenet
python3 -m rn50.fake_imagenet "$tree" --classes 100 --train-per-class "${TRAIN_PER_CLASS:-400}" \
  --val-per-class "${VAL_PER_CLASS:-50}" 2>&1 | tail -n 1 | tee -a "$out/env.txt"

run() {  # name, then overrides; its log, summary.json and epochs.jsonl land in OUTDIR
  local name=$1; shift
  local t0=$SECONDS
  python3 -m rn50 data=dali data.root="$tree" "$@" hydra.run.dir="$work/$name" > "$out/$name.log" 2>&1
  echo "$name: exit $? in $((SECONDS - t0)) s: python -m rn50 data=dali data.root=DIR $*" | tee -a "$out/env.txt"
  cp "$work/$name/summary.json" "$out/$name.json" 2>/dev/null
  cp "$work/$name/epochs.jsonl" "$out/$name.epochs.jsonl" 2>/dev/null
}
run throughput
run accuracy train=accuracy train.epochs=2 train.lr_warmup_epochs=1

python3 - "$out" <<'PY'
import json, pathlib, sys

out = pathlib.Path(sys.argv[1])
reference = json.loads((out / "throughput.json").read_text())["throughput/images_per_sec"]
epochs = [json.loads(line) for line in (out / "accuracy.epochs.jsonl").read_text().splitlines()]
rows = [f"throughput run (train=throughput, same settings): {reference:.1f} images/sec", "",
        "| epoch | training images/sec | x throughput run | epoch s | of it evaluation s | checkpoint s | top-1 % |",
        "| --- | --- | --- | --- | --- | --- | --- |"]
for e in epochs:
    rows.append(f"| {e['epoch']} | {e['train/images_per_sec']:.1f} | {e['train/images_per_sec'] / reference:.3f} | "
                f"{e['time/epoch_s']:.2f} | {e['time/eval_s']:.2f} | {e.get('time/checkpoint_s', float('nan')):.2f} | "
                f"{100 * e.get('val/top1', float('nan')):.2f} |")
last = epochs[-1]
# The cost outside evaluation: training steps plus the checkpoint write, against the throughput run.
outside = last["time/epoch_s"] - last["time/eval_s"] + last.get("time/checkpoint_s", 0.0)
images = last["train/images_per_sec"] * (last["time/epoch_s"] - last["time/eval_s"])
rows += ["", f"epoch {last['epoch']}, training plus checkpoint write: {images / outside:.1f} images/sec, "
         f"{1 - images / outside / reference:+.2%} under the throughput run"]
table = "\n".join(rows) + "\n"
(out / "table.md").write_text(table)
print(table)
PY
