#!/usr/bin/env bash
# Issues 42 and 44 on a warm 2-GPU machine (the fourteenth session; 4-GPU kinds are not lent today).
# Started once by c1.sh with setsid; c2-c4 carry DALI's parts, later calls snapshot /tmp/res.
# No TORCHINDUCTOR_* variable but the cache dir: rn50's own warm-start settings (rn50/rank/warm_compile.py).
#   A  GPU 0: the warm-compile gpu test, the DALI gpu test, the bare loop eager at amp and bf16;
#      GPU 1: experiment=fastest cold, then the same again warm (rn50's own settings)
#   B  experiment=fastest dist=1n2g cold, C the same again: the second start (target <= 60 s)
#   D  amp: the bare loop at 2, the sweep dist=1n1g,1n2g, the bare loop at 2 again
#   F  the bare loop's whole step in one CUDA graph with DDP, at 1 and 2 GPUs
#   E  data=dali at 2 GPUs: synthetic, the defaults, prefetch 5, hw 0.65, the one-GPU CPU settings
#   G  bf16 sweep and bare at 2; two torchrun nodes of 1 GPU over sockets against the bare loop
set -u
R=/tmp/res; mkdir -p $R
exec >> $R/orch.log 2>&1
T0=$(date +%s)
now() { echo $(( $(date +%s) - T0 )); }
log() { echo "[$(now) s] $*"; }
left() { local end=${END_S:-1600}; [ -s /tmp/end_s ] && end=$(cat /tmp/end_s); echo $(( end - $(now) )); }
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
one() {  # OUTDIR NAME TIMEOUT overrides...: one python -m rn50 run, its summary and rank logs kept
  local o=$1 n=$2 t=$3; shift 3; mkdir -p $o/$n; local s; s=$(now)
  timeout $t python3 -m rn50 "$@" hydra.run.dir=/tmp/work/$n > $o/$n.log 2>&1
  log "$n: exit $? in $(( $(now) - s )) s: python -m rn50 $*"
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
  timeout 420 python3 -m pytest -n 0 -m gpu tests/e2e/test_warm_compile_gpu.py -q -s -p no:cacheprovider \
    > $R/a0/pytest_warm_compile_gpu.txt 2>&1
  log "a0: warm-compile gpu test: $(tail -n 1 $R/a0/pytest_warm_compile_gpu.txt)"
  if wait_dali; then
    timeout 360 python3 -m pytest -n 0 -m gpu tests/e2e/test_dali_gpu.py -q -s -p no:cacheprovider \
      > $R/a0/pytest_dali_gpu.txt 2>&1
    log "a0: dali gpu test: $(tail -n 1 $R/a0/pytest_dali_gpu.txt)"
  else log "a0: no DALI"; fi
  REPEATS=3 BUDGET_S=150 bash $DDP $R/a0b nvl:1:bare nvl:1:bare:precision=bf16 > $R/a0b.out 2>&1
  log "a0: bare eager done" ) &
( export CUDA_VISIBLE_DEVICES=1
  REPEATS=3 BUDGET_S=560 bash $DDP $R/a1 nvl:1:rn50:experiment=fastest "nvl:1:rn50:experiment=fastest,RUN=2" \
    > $R/a1.out 2>&1; log "a1: fastest cold and warm done" ) &
wait
log "A done"

REPEATS=3 phase B 330 $R/b nvl:2:rn50:experiment=fastest
REPEATS=1 phase C 100 $R/c "nvl:2:rn50:experiment=fastest,RUN=2"
REPEATS=3 phase D 200 $R/d nvl:2:bare "nvl:2:sweep:dist=1n1g|1n2g" "nvl:2:bare:RUN=2"
REPEATS=3 phase F 100 $R/f nvl:1:bare:cuda_graph=true,TORCH_NCCL_ASYNC_ERROR_HANDLING=0 \
  nvl:2:bare:cuda_graph=true,TORCH_NCCL_ASYNC_ERROR_HANDLING=0
if [ -e /tmp/dali.ok ] && [ "$(left)" -gt 120 ]; then
  log "E: data=dali at 2 GPUs"; mkdir -p $R/e
  one $R/e dist2_synthetic 110 dist=1n2g
  for lever in "" data.dali.prefetch_queue_depth=5 data.dali.hw_decoder_load=0.65 \
      "data.dali.num_threads=12 data.dali.hw_decoder_load=0 data.dali.cpu_decode_share=0.25"; do
    [ "$(left)" -gt 80 ] || { log "E: $lever skipped"; continue; }
    name=dist2_dali${lever:+_${lever//data.dali./}}; name=${name//[=. ]/_}
    # shellcheck disable=SC2086  # a lever is one or more keys
    one $R/e "$name" $(( $(left) - 10 < 120 ? $(left) - 10 : 120 )) dist=1n2g data=dali data.root=$TREE $lever
  done
fi
REPEATS=3 phase G 100 $R/g "nvl:2:sweep:dist=1n1g|1n2g,precision=bf16" nvl:2:bare:precision=bf16 sock:2:bare sock:2:2x1
log "all done"
touch $R/ALL_DONE
