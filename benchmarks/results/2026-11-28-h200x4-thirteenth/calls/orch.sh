#!/usr/bin/env bash
# Issues 42 and 44's GPU plan for the thirteenth session, started once by c1.sh with setsid on a warm 4-GPU
# machine, so it outlives the call that starts it; c2-c4 carry DALI's parts meanwhile, later calls only
# snapshot /tmp/res. Runs from /tmp/repo (a copy of the working tree), results and a log in /tmp/res.
# Phases, in order of priority (a phase that would pass the deadline is skipped):
#   A  four 1-GPU jobs at once: rn50 experiment=fastest (the 1-GPU reference) then the DALI gpu test; the bare
#      loop compiled the same way, then eager amp and bf16; the static-launcher test (cold, warm, warm with one
#      compile thread, in cache B); experiment=fastest data=dali (fp16 input: its own cold compile)
#   B  rn50 experiment=fastest on 4 GPUs with model.compile_ddp=no_optimization (cache B, static launcher off)
#   C  the bare loop compiled the same way on 4 GPUs
#   D  B again: the second start
#   F  sweeps dist=1n1g,1n2g,1n4g at amp and bf16, with the bare loop at 2 and 4 GPUs
#   G  data=dali (and imagefolder) at dist=1n4g, rn50's defaults
set -u
R=/tmp/res; mkdir -p $R
exec >> $R/orch.log 2>&1
T0=$(date +%s)
now() { echo $(( $(date +%s) - T0 )); }
log() { echo "[$(now) s] $*"; }
# seconds after the start by which everything must be done; a later call may lower it in /tmp/end_s
left() { local end=${END_S:-1580}; [ -s /tmp/end_s ] && end=$(cat /tmp/end_s); echo $(( end - $(now) )); }
FAST=batch_size=512,compile=true,compile_mode=reduce-overhead,autotune_pointwise=true,autotune_coordinate_descent=true
CA=/root/.cache/rn50/torchinductor     # torch's defaults
CB=/root/.cache/rn50/torchinductor-s0  # static CUDA launcher off (TORCHINDUCTOR_USE_STATIC_CUDA_LAUNCHER=0)
S0=TORCHINDUCTOR_USE_STATIC_CUDA_LAUNCHER=0
DDP=benchmarks/scripts/ddp_gpu.sh
TREE=/tmp/imagenet
export PYTHONUNBUFFERED=1
log "start: $(nvidia-smi -L | tr '\n' ';')"

# DALI: installed once its four parts are stashed (each call touches /tmp/dchunks/done-N after its copy)
(
  until [ -e /tmp/dchunks/done-1 ] && [ -e /tmp/dchunks/done-2 ] && [ -e /tmp/dchunks/done-3 ] && [ -e /tmp/dchunks/done-4 ]; do sleep 3; done
  site=$(python3 -c 'import os,torch;print(os.path.dirname(os.path.dirname(torch.__file__)))')
  cat /tmp/dchunks/dsite.tar.xz.part-* | xz -dc -T0 | tar xf - -C "$site" \
    && python3 -c 'import nvidia.dali as d, nvidia.dali.fn; print("dali", d.__version__)' && touch /tmp/dali.ok
  log "dali: $( [ -e /tmp/dali.ok ] && echo installed || echo FAILED)"
) &
( python3 -m rn50.fake_imagenet $TREE --classes 100 --train-per-class 100 --val-per-class 1 2>&1 | tail -n 1 > $R/fake_imagenet.txt
  touch /tmp/tree.ok; log "jpegs: $(cat $R/fake_imagenet.txt)" ) &
wait_dali() { local i=0; until [ -e /tmp/dali.ok ] && [ -e /tmp/tree.ok ]; do sleep 5; i=$((i+5)); [ $i -gt 400 ] && return 1; done; }
one() {  # OUTDIR NAME TIMEOUT overrides...: one python -m rn50 run, its summary and rank logs kept
  local o=$1 n=$2 t=$3; shift 3; mkdir -p $o/$n; local s=$(now)
  timeout $t python3 -m rn50 "$@" hydra.run.dir=/tmp/work/$n > $o/$n.log 2>&1
  log "$n: exit $? in $(( $(now) - s )) s: python -m rn50 $*"
  cp /tmp/work/$n/summary.json $o/$n.json 2>/dev/null; (cd /tmp/work/$n 2>/dev/null && cp --parents $(find . -name 'rank*.log') $o/$n/ 2>/dev/null)
}

log "A: four 1-GPU jobs"
( export TORCHINDUCTOR_CACHE_DIR=$CA CUDA_VISIBLE_DEVICES=0
  REPEATS=3 BUDGET_S=560 bash $DDP $R/a0 nvl:1:rn50:experiment=fastest > $R/a0.out 2>&1; log "a0: fastest done"
  if wait_dali; then
    timeout 300 python3 -m pytest -m gpu tests/e2e/test_dali_gpu.py -q -s -p no:cacheprovider > $R/a0/pytest_dali_gpu.txt 2>&1
    log "a0: dali gpu test: $(tail -n 1 $R/a0/pytest_dali_gpu.txt)"
  fi ) &
( export TORCHINDUCTOR_CACHE_DIR=$CA CUDA_VISIBLE_DEVICES=1
  REPEATS=3 BUDGET_S=560 bash $DDP $R/a1 nvl:1:bare:$FAST nvl:1:bare nvl:1:bare:precision=bf16 > $R/a1.out 2>&1
  log "a1: bare done" ) &
( export TORCHINDUCTOR_CACHE_DIR=$CB CUDA_VISIBLE_DEVICES=2
  REPEATS=1 BUDGET_S=700 bash $DDP $R/a2 nvl:1:rn50:experiment=fastest,$S0 nvl:1:rn50:experiment=fastest,$S0,RUN=2 \
    nvl:1:rn50:experiment=fastest,$S0,RUN=3,TORCHINDUCTOR_COMPILE_THREADS=1 > $R/a2.out 2>&1
  log "a2: static-launcher test done" ) &
( export TORCHINDUCTOR_CACHE_DIR=$CA CUDA_VISIBLE_DEVICES=3
  if wait_dali; then
    one $R/a3 fastest_dali 560 experiment=fastest data=dali data.root=$TREE bench.repeats=3
    [ "$(now)" -lt 430 ] && one $R/a3 fastest_dali_hw099 150 experiment=fastest data=dali data.root=$TREE \
      data.dali.hw_decoder_load=0.99 data.dali.cpu_decode_share=0 bench.repeats=1
  else log "a3: no DALI"; fi ) &
wait
log "A done"

phase() {  # NAME MIN_SECONDS OUTDIR CASE...: ddp_gpu.sh with the time left, if at least MIN_SECONDS
  local n=$1 need=$2 o=$3; shift 3
  if [ "$(left)" -lt "$need" ]; then log "$n: skipped, $(left) s left"; return; fi
  log "$n: $*"
  BUDGET_S=$(left) bash $DDP "$o" "$@" > "$o.out" 2>&1; log "$n: done"; grep "done in\|skipped" "$o.out"
}
export TORCHINDUCTOR_CACHE_DIR=$CB
REPEATS=3 phase B 300 $R/b "nvl:4:rn50:experiment=fastest,model.compile_ddp=no_optimization,$S0"
REPEATS=3 phase C 150 $R/c "nvl:4:bare:$FAST,compile_ddp=no_optimization,$S0"
REPEATS=1 phase D 100 $R/d "nvl:4:rn50:experiment=fastest,model.compile_ddp=no_optimization,$S0,RUN=2,TORCHINDUCTOR_COMPILE_THREADS=1"
export TORCHINDUCTOR_CACHE_DIR=$CA
REPEATS=3 phase F 120 $R/f "nvl:4:sweep:dist=1n1g|1n2g|1n4g" nvl:2:bare nvl:4:bare \
  "nvl:4:sweep:dist=1n1g|1n2g|1n4g,precision=bf16"
if [ -e /tmp/dali.ok ] && [ "$(left)" -gt 70 ]; then
  log "G: data=dali at 4 GPUs"; mkdir -p $R/g
  one $R/g dist4_dali $(( $(left) - 10 )) dist=1n4g data=dali data.root=$TREE
  [ "$(left)" -gt 80 ] && one $R/g dist4_imagefolder $(( $(left) - 10 )) dist=1n4g data=imagefolder data.root=$TREE
  [ "$(left)" -gt 60 ] && one $R/g dist4_synthetic $(( $(left) - 10 )) dist=1n4g
fi
log "all done"
touch $R/ALL_DONE
