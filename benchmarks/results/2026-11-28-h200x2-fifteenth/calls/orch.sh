#!/usr/bin/env bash
# Issues 42 and 44 on a warm 2-GPU machine (the fifteenth session; 4-GPU kinds are not lent today).
# Started once by c1.sh with setsid; c2-c4 carry DALI's parts, later calls snapshot /tmp/res.
#   A  GPU 0: the bare loop at amp and bf16, then the DALI gpu test (data=dali's defaults, now hw_decoder_load=0.65);
#      GPU 1: data=dali on one GPU: synthetic, the defaults, hw_decoder_load=0.99 (the defaults before), 3 windows each
#   B  amp: the bare loop at 2, the sweep dist=1n1g,1n2g (its report: the clock column), the bare loop at 2 again
#   C  bf16: the sweep and the bare loop at 2
#   D  data=dali at 2 GPUs, 3 windows each: synthetic, the defaults, 0.99, the separated executor, cudaMallocAsync, the defaults again
#   E  amp with NCCL on sockets: the bare loop and rn50 at 2, if time is left
set -u
R=/tmp/res; mkdir -p $R
exec >> $R/orch.log 2>&1
T0=$(date +%s)
now() { echo $(( $(date +%s) - T0 )); }
log() { echo "[$(now) s] $*"; }
left() { local end=${END_S:-1400}; [ -s /tmp/end_s ] && end=$(cat /tmp/end_s); echo $(( end - $(now) )); }
DDP=benchmarks/scripts/ddp_gpu.sh
TREE=/tmp/imagenet
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_CACHE_DIR=/root/.cache/rn50/torchinductor
log "start: $(nvidia-smi -L | tr '\n' ';')"

( while ! { [ -e /tmp/dchunks/done-1 ] && [ -e /tmp/dchunks/done-2 ] && [ -e /tmp/dchunks/done-3 ] \
      && [ -e /tmp/dchunks/done-4 ]; }; do sleep 3; done
  site=$(python3 -c 'import os,torch;print(os.path.dirname(os.path.dirname(torch.__file__)))')
  cat /tmp/dchunks/dsite.tar.xz.part-* | xz -dc -T0 | tar xf - -C "$site" \
    && python3 -c 'import nvidia.dali as d, nvidia.dali.fn; print("dali", d.__version__)' && touch /tmp/dali.ok
  log "dali: $( [ -e /tmp/dali.ok ] && echo installed || echo FAILED)"; touch /tmp/dali.tried ) &
( python3 -m rn50.fake_imagenet $TREE --classes 100 --train-per-class 100 --val-per-class 1 2>&1 | tail -n 1 \
    > $R/fake_imagenet.txt; touch /tmp/tree.ok; log "jpegs: $(cat $R/fake_imagenet.txt)" ) &
wait_dali() {  # 0 once DALI and the JPEGs are there, 1 if DALI failed or 400 s passed
  local waited=0
  while ! { [ -e /tmp/dali.tried ] && [ -e /tmp/tree.ok ]; }; do
    sleep 5; waited=$((waited + 5)); [ $waited -gt 400 ] && return 1
  done
  [ -e /tmp/dali.ok ]
}
one() {  # OUTDIR NAME TIMEOUT overrides...: one python -m rn50 run (environment: $ENVS), its summary and rank logs kept
  local o=$1 n=$2 t=$3; shift 3; mkdir -p $o/$n; local s; s=$(now)
  # shellcheck disable=SC2086  # ENVS is zero or more NAME=VALUE
  env ${ENVS:-} timeout $t python3 -m rn50 "$@" hydra.run.dir=/tmp/work/$n > $o/$n.log 2>&1
  log "$n: exit $? in $(( $(now) - s )) s: ${ENVS:-} python -m rn50 $*"
  cp /tmp/work/$n/summary.json $o/$n.json 2>/dev/null
  (cd /tmp/work/$n 2>/dev/null && cp --parents $(find . -name 'rank*.log') $o/$n/ 2>/dev/null)
}
phase() {  # NAME MIN_SECONDS OUTDIR CASE...: ddp_gpu.sh with the time left, if at least MIN_SECONDS
  local n=$1 need=$2 o=$3; shift 3
  if [ "$(left)" -lt "$need" ]; then log "$n: skipped, $(left) s left"; return; fi
  log "$n: $*"
  BUDGET_S=$(left) bash $DDP "$o" "$@" > "$o.out" 2>&1; log "$n: done"; grep "done in\|skipped" "$o.out"
}

log "A: 1-GPU jobs"
( export CUDA_VISIBLE_DEVICES=0; mkdir -p $R/a0
  REPEATS=3 BUDGET_S=200 bash $DDP $R/a0b nvl:1:bare nvl:1:bare:precision=bf16 > $R/a0b.out 2>&1
  log "a0: bare eager done"
  if wait_dali; then
    timeout 300 python3 -m pytest -n 0 -m gpu tests/e2e/test_dali_gpu.py -q -s -p no:cacheprovider \
      > $R/a0/pytest_dali_gpu.txt 2>&1
    log "a0: dali gpu test: $(tail -n 1 $R/a0/pytest_dali_gpu.txt)"
  else log "a0: no DALI"; fi ) &
( export CUDA_VISIBLE_DEVICES=1; mkdir -p $R/a1
  one $R/a1 gpu1_synthetic 120 bench.repeats=3
  if wait_dali; then
    one $R/a1 gpu1_dali 120 data=dali data.root=$TREE bench.repeats=3
    one $R/a1 gpu1_dali_hw099 120 data=dali data.root=$TREE bench.repeats=3 data.dali.hw_decoder_load=0.99
    one $R/a1 gpu1_dali_again 120 data=dali data.root=$TREE bench.repeats=3
  fi ) &
wait
log "A done"

REPEATS=3 phase B 200 $R/b nvl:2:bare "nvl:2:sweep:dist=1n1g|1n2g" "nvl:2:bare:RUN=2"
REPEATS=3 phase C 150 $R/c "nvl:2:sweep:dist=1n1g|1n2g,precision=bf16" nvl:2:bare:precision=bf16
if [ -e /tmp/dali.ok ] && [ "$(left)" -gt 120 ]; then
  log "D: data=dali at 2 GPUs"; mkdir -p $R/d
  one $R/d dist2_synthetic 110 dist=1n2g bench.repeats=3
  for lever in "" "data.dali.hw_decoder_load=0.99" "data.dali.cpu_prefetch_queue_depth=2" \
      "DALI_USE_CUDA_MALLOC_ASYNC=1" "again"; do
    [ "$(left)" -gt 70 ] || { log "D: $lever skipped"; continue; }
    name=dist2_dali${lever:+_${lever//data.dali./}}; name=${name//[=. ]/_}
    keys=$lever; envs=""
    case $lever in again) keys="" ;; [A-Z]*) keys=""; envs=$lever ;; esac
    # shellcheck disable=SC2086  # a lever is zero or one key
    ENVS=$envs one $R/d "$name" $(( $(left) - 10 < 120 ? $(left) - 10 : 120 )) dist=1n2g data=dali data.root=$TREE \
      bench.repeats=3 $keys
  done
fi
REPEATS=3 phase E 150 $R/e sock:2:bare sock:2:rn50
log "all done"
touch $R/ALL_DONE
