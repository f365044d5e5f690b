# call 3: rn50 on 2 GPUs with dynamo's DDP split off (one graph, as on 1 GPU: read from the cache), then the
# bare loop compiled the same way as experiment=fastest under torchrun on 2 GPUs (the second reference)
t0=$SECONDS
. benchmarks/results/2026-11-28-h200x2/calls/common.sh
stash .carry/d3
FAST=batch_size=512,compile=true,compile_mode=reduce-overhead,autotune_pointwise=true,autotune_coordinate_descent=true
PYTHONPATH=$PWD/benchmarks/probes/optimize_ddp REPEATS=3 BUDGET_S=$((580 - SECONDS + t0)) \
  bash benchmarks/scripts/ddp_gpu.sh /tmp/res/c3 \
  nvl:2:rn50:experiment=fastest,RN50_PROBE_OPTIMIZE_DDP=no_optimization nvl:2:bare:$FAST \
  ${C3_MORE:-}
grep -h "timers" /tmp/res/c3/*/rank0.log
pack c3
