# call 1: install; experiment=fastest at 1 GPU from a cold inductor cache, rn50 on GPU 0 and the bare loop compiled
# the same way on GPU 1 side by side (fills the cache for the later calls); then bf16 over sockets at 2 GPUs
t0=$SECONDS
python3 -m pip install -q --no-index --find-links .carry/wh rn50 > /tmp/pip.txt 2>&1 || { tail /tmp/pip.txt; exit 1; }
. benchmarks/results/2026-11-28-h200x2/calls/common.sh
stash .carry/d1
FAST=batch_size=512,compile=true,compile_mode=reduce-overhead,autotune_pointwise=true,autotune_coordinate_descent=true
(CUDA_VISIBLE_DEVICES=1 REPEATS=3 BUDGET_S=$((450 - SECONDS + t0)) bash benchmarks/scripts/ddp_gpu.sh /tmp/res/c1b \
  nvl:1:bare:$FAST > /tmp/res/c1b.out 2>&1) &
CUDA_VISIBLE_DEVICES=0 REPEATS=3 BUDGET_S=$((450 - SECONDS + t0)) bash benchmarks/scripts/ddp_gpu.sh /tmp/res/c1f \
  nvl:1:rn50:experiment=fastest > /tmp/res/c1f.out 2>&1
wait
cat /tmp/res/c1f.out /tmp/res/c1b.out; cp /tmp/res/c1f.out /tmp/res/c1f/; cp /tmp/res/c1b.out /tmp/res/c1b/
grep -h "timers" /tmp/res/c1f/*/rank0.log
REPEATS=3 BUDGET_S=$((570 - SECONDS + t0)) bash benchmarks/scripts/ddp_gpu.sh /tmp/res/c1s \
  sock:2:bare:precision=bf16 sock:2:rn50:precision=bf16
pack c1f; pack c1b; pack c1s
