#!/usr/bin/env bash
# Sixteenth session, 2 GPUs (a fallback while no 4-GPU kind is lent; issue 44): data=dali at 1n2g against synthetic
# before and after, with the levers not yet tried at 2 GPUs (prefetch 5, stream_outputs, the hybrid CPU decoder),
# the decoded-image cache over train=accuracy epochs, and imagefolder. Deadline: seconds from start in /tmp/end_s.
set -u
R=/tmp/res; mkdir -p $R
exec >> $R/orch.log 2>&1
T0=$(date +%s)
now() { echo $(( $(date +%s) - T0 )); }
log() { echo "[$(now) s] $*"; }
left() { local end=1300; [ -s /tmp/end_s ] && end=$(cat /tmp/end_s); echo $(( end - $(now) )); }
DDP=benchmarks/scripts/ddp_gpu.sh
TREE=/tmp/imagenet
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_CACHE_DIR=/root/.cache/rn50/torchinductor
log "start: $(nvidia-smi -L | tr '\n' ';') cpus $(nproc)"
( while ! { [ -e /tmp/dchunks/done-1 ] && [ -e /tmp/dchunks/done-2 ] && [ -e /tmp/dchunks/done-3 ] \
      && [ -e /tmp/dchunks/done-4 ]; }; do sleep 3; done
  site=$(python3 -c 'import os,torch;print(os.path.dirname(os.path.dirname(torch.__file__)))')
  cat /tmp/dchunks/dsite.tar.xz.part-* | xz -dc -T0 | tar xf - -C "$site" \
    && python3 -c 'import nvidia.dali as d, nvidia.dali.fn; print("dali", d.__version__)' && touch /tmp/dali.ok
  log "dali: $( [ -e /tmp/dali.ok ] && echo installed || echo FAILED)" ) &
( python3 -m rn50.fake_imagenet $TREE --classes 100 --train-per-class 100 --val-per-class 1 2>&1 | tail -n 1 \
    > $R/fake_imagenet.txt; touch /tmp/tree.ok; log "jpegs: $(cat $R/fake_imagenet.txt)" ) &
one() {  # OUTDIR NAME TIMEOUT overrides...: one python -m rn50 run, its summary, epochs and rank logs kept
  local o=$1 n=$2 t=$3; shift 3; mkdir -p $o/$n; local s; s=$(now)
  [ "$(left)" -gt 60 ] || { log "$n: skipped, $(left) s left"; return; }
  timeout $(( t < $(left) - 10 ? t : $(left) - 10 )) python3 -m rn50 "$@" hydra.run.dir=/tmp/work/$n > $o/$n.log 2>&1
  log "$n: exit $? in $(( $(now) - s )) s: python -m rn50 $*"
  cp /tmp/work/$n/summary.json $o/$n.json 2>/dev/null; cp /tmp/work/$n/epochs.jsonl $o/$n.epochs.jsonl 2>/dev/null
  (cd /tmp/work/$n 2>/dev/null && cp --parents $(find . -name 'rank*.log') $o/$n/ 2>/dev/null)
}
phase() {  # NAME MIN_SECONDS OUTDIR CASE...: ddp_gpu.sh with the time left, if at least MIN_SECONDS
  local n=$1 need=$2 o=$3; shift 3
  if [ "$(left)" -lt "$need" ]; then log "$n: skipped, $(left) s left"; return; fi
  log "$n: $*"
  BUDGET_S=$(left) bash $DDP "$o" "$@" > "$o.out" 2>&1; log "$n: done"; grep "done in\|skipped" "$o.out"
}
while [ ! -e /tmp/dali.ok ] || [ ! -e /tmp/tree.ok ]; do sleep 2; [ "$(now)" -gt 400 ] && break; done
log "dali $( [ -e /tmp/dali.ok ] && echo ok) tree $( [ -e /tmp/tree.ok ] && echo ok)"
mkdir -p $R/g $R/h
D=(dist=1n2g bench.repeats=3 data=dali data.root=$TREE)
one $R/g dist2_synthetic 100 dist=1n2g bench.repeats=3
one $R/g dist2_dali_1 120 "${D[@]}"
one $R/g dist2_dali_prefetch5 120 "${D[@]}" data.dali.prefetch_queue_depth=5
one $R/g dist2_dali_stream 120 "${D[@]}" data.dali.stream_outputs=true
one $R/g dist2_dali_hybrid 120 "${D[@]}" data.dali.hw_decoder_load=0 data.dali.num_threads=12 data.dali.cpu_decode_share=0.25
one $R/g dist2_dali_2 120 "${D[@]}"
one $R/g dist2_synthetic_2 100 dist=1n2g bench.repeats=3
one $R/h acc2_nocache 150 dist=1n2g train=accuracy train.epochs=6 data=dali data.root=$TREE
one $R/h acc2_cache 150 dist=1n2g train=accuracy train.epochs=6 data=dali data.root=$TREE data.dali.cache_size_mb=8000
one $R/h acc2_cache_half 150 dist=1n2g train=accuracy train.epochs=6 data=dali data.root=$TREE data.dali.cache_size_mb=1300
one $R/g dist2_imagefolder 150 dist=1n2g bench.repeats=3 data=imagefolder data.root=$TREE
[ "$(left)" -gt 240 ] && { CUDA_VISIBLE_DEVICES=0 timeout $(( $(left) - 10 )) python3 -m pytest -n 0 -p no:cacheprovider -m gpu \
   tests/e2e/test_dali_gpu.py -s -q > $R/pytest_dali_gpu.txt 2>&1; log "pytest dali gpu: exit $?"; }
log "all done"
touch $R/ALL_DONE
