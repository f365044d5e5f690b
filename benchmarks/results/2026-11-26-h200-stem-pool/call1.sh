#!/usr/bin/env bash
# Stem-pool probe, call 1: install, numeric check, the pool alone, then the compiled bare loop with each variant.
set -u
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --find-links .carry/wh rn50 2>&1 | tail -2
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader
python3 -c "import torch, torchvision, pytorch_lightning as pl; print('torch', torch.__version__, 'torchvision', torchvision.__version__, 'lightning', pl.__version__, 'cudnn', torch.backends.cudnn.version())"
export PYTHONPATH=.
python3 benchmarks/stem_pool_probe.py check 2>&1 | tee $OUT/check.jsonl
python3 benchmarks/stem_pool_probe.py micro --batch-size 512 2>&1 | grep -v Warning | tee $OUT/micro.jsonl
ARGS="--compile --compile-mode reduce-overhead --batch-size 512 --warmup-steps 20 --steps 100"
for v in max_pool shifted separable; do
  s=$(date +%s)
  timeout 170 python3 benchmarks/stem_pool_probe.py step $v $ARGS 2>$OUT/step_$v.err | grep '"step"' | tee -a $OUT/step.jsonl
  echo "$v took $(( $(date +%s) - s )) s"; tail -2 $OUT/step_$v.err
done
