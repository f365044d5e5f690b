# call 2: experiment=fastest on 4 GPUs: the first run compiles (cold for DDP's graphs), the second should
# reach its first measured step within 60 s; then 1 GPU from the cache, the scaling reference in this call
t0=$SECONDS
. .carry/plan/common.sh
stash .carry/d2
REPEATS=3 BUDGET_S=$((585 - SECONDS + t0)) bash benchmarks/scripts/ddp_gpu.sh /tmp/res/c2 \
  nvl:4:rn50:experiment=fastest nvl:4:rn50:experiment=fastest,RUN=2 nvl:1:rn50:experiment=fastest
pack c2
