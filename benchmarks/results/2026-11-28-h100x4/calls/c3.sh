# call 3: whatever of call 2's fastest runs did not fit (RERUN), bf16 over sockets at 4 and 2 GPUs, then the
# two-torchrun-node run over sockets again beside the single-node bare loop, while time is left
t0=$SECONDS
. .carry/plan/common.sh
stash .carry/d3
THREADS=1 REPEATS=3 BUDGET_S=$((585 - SECONDS + t0)) bash benchmarks/scripts/ddp_gpu.sh /tmp/res/c3 ${RERUN:-} \
  sock:4:bare:precision=bf16 sock:4:rn50:precision=bf16 sock:2:bare:precision=bf16 sock:2:rn50:precision=bf16 \
  sock:4:bare sock:4:2x2
pack c3
