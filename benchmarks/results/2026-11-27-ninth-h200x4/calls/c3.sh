# call 3: bf16 at 4 GPUs over NVLink; two torchrun nodes of 2 GPUs over sockets; the bare loop again
t0=$SECONDS
. .carry/plan/common.sh
stash .carry/d3
THREADS=1 REPEATS=3 BUDGET_S=$((560 - SECONDS + t0)) bash benchmarks/scripts/ddp_gpu.sh /tmp/res/c3 \
  nvl:4:bare:precision=bf16 nvl:4:rn50:precision=bf16 sock:4:2x2 sock:4:bare:RUN=2 sock:4:rn50:RUN=2
pack c3
