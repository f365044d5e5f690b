# call 2: experiment=fastest on 2 GPUs: the first run compiles DDP's split graphs (cold), the second reads the
# cache (its rank0.log gives torch's compile timers); then 1 GPU from the cache, the scaling reference
t0=$SECONDS
. benchmarks/results/2026-11-28-h200x2/calls/common.sh
stash .carry/d2
REPEATS=3 BUDGET_S=$((580 - SECONDS + t0)) bash benchmarks/scripts/ddp_gpu.sh /tmp/res/c2 \
  nvl:2:rn50:experiment=fastest nvl:2:rn50:experiment=fastest,RUN=2 nvl:1:rn50:experiment=fastest
grep -h "timers" /tmp/res/c2/*/rank0.log
pack c2
