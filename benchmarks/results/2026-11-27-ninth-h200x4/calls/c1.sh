# call 1: install rn50's dependencies; NCCL on sockets at 2 GPUs, rn50 against the bare loop, with variants
t0=$SECONDS
python3 -m pip install -q --no-index --find-links .carry/wh rn50 > /tmp/pip.txt 2>&1 || { tail /tmp/pip.txt; exit 1; }
. .carry/plan/common.sh
stash .carry/d1
CUDA_VISIBLE_DEVICES=0,1 THREADS=1 REPEATS=3 BUDGET_S=$((560 - SECONDS + t0)) bash benchmarks/scripts/ddp_gpu.sh /tmp/res/c1 \
  sock:2:bare sock:2:rn50 sock:2:rn50:OMP_NUM_THREADS=1 sock:2:rn50:CUDA_DEVICE_MAX_CONNECTIONS=8 \
  sock:2:rn50:NCCL_DEBUG=WARN sock:2:bare:RUN=2 sock:2:rn50:RUN=2
pack c1
