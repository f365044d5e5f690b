# call 2: profiles of both at 2 GPUs on sockets; 4 GPUs on sockets, with OMP_NUM_THREADS=1
t0=$SECONDS
. .carry/plan/common.sh
stash .carry/d2
CUDA_VISIBLE_DEVICES=0,1 PROFILE=1 REPEATS=2 BUDGET_S=170 bash benchmarks/scripts/ddp_gpu.sh /tmp/res/c2p sock:2:bare sock:2:rn50
THREADS=1 REPEATS=3 BUDGET_S=$((560 - SECONDS + t0)) bash benchmarks/scripts/ddp_gpu.sh /tmp/res/c2 \
  sock:4:bare sock:4:rn50 sock:4:rn50:OMP_NUM_THREADS=1 sock:4:rn50:CUDA_DEVICE_MAX_CONNECTIONS=8
mkdir -p /tmp/res/c2/p && cp -r /tmp/res/c2p/* /tmp/res/c2/p/
pack c2
