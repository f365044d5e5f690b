# call 1: install rn50's dependencies; GPU 1: experiment=fastest at 1 GPU from a cold inductor cache (fills it
# for the later calls); GPU 0 meanwhile: issue 45's check, rn50 at HEAD against a8871ae and the bare loop
t0=$SECONDS
python3 -m pip install -q --no-index --find-links .carry/wh rn50 > /tmp/pip.txt 2>&1 || { tail /tmp/pip.txt; exit 1; }
. .carry/plan/common.sh
stash .carry/d1
(CUDA_VISIBLE_DEVICES=1 REPEATS=3 BUDGET_S=$((540 - SECONDS + t0)) bash benchmarks/scripts/ddp_gpu.sh /tmp/res/c1f \
  nvl:1:rn50:experiment=fastest > /tmp/res/c1f.out 2>&1) &
CUDA_VISIBLE_DEVICES=0 bash benchmarks/scripts/arch_before_after_gpu.sh /tmp/res/c1a .carry/before 2>&1 | tee /tmp/res/c1a.out
wait
cat /tmp/res/c1f.out; cp /tmp/res/c1f.out /tmp/res/c1f/; cp /tmp/res/c1a.out /tmp/res/c1a/
pack c1a; pack c1f
