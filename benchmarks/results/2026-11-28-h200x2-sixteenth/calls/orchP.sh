#!/usr/bin/env bash
# Sixteenth session, 2 GPUs, the last ~600 s (issue 44): data=dali's step on 1 GPU, profiled against synthetic, and
# the one-GPU settings profiled at 2 GPUs: why the same DALI work costs more at 2 GPUs than on 1.
set -u
R=/tmp/res; mkdir -p $R
exec >> $R/orch.log 2>&1
T0=$(date +%s)
now() { echo $(( $(date +%s) - T0 )); }
log() { echo "[$(now) s] $*"; }
left() { local end=420; [ -s /tmp/end_s ] && end=$(cat /tmp/end_s); echo $(( end - $(now) )); }
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
mkdir -p $R/q
prof() {  # NAME overrides...: a profiled run (5 steps after 2 windows), its summary and rank 0's trace kept
  local n=$1; shift; local s; s=$(now)
  [ "$(left)" -gt 50 ] || { log "$n: skipped, $(left) s left"; return; }
  timeout $(( $(left) - 5 )) python3 -m rn50 bench.repeats=2 profiler=pytorch "$@" hydra.run.dir=/tmp/work/$n > $R/q/$n.log 2>&1
  log "$n: exit $? in $(( $(now) - s )) s: python -m rn50 bench.repeats=2 profiler=pytorch $*"
  cp /tmp/work/$n/summary.json $R/q/$n.json 2>/dev/null; cp /tmp/work/$n/trace.json.gz $R/q/${n}_trace.json.gz 2>/dev/null
}
CUDA_VISIBLE_DEVICES=0 prof gpu1_synthetic
CUDA_VISIBLE_DEVICES=0 prof gpu1_dali data=dali data.root=$TREE
prof dist2_hybrid dist=1n2g data=dali data.root=$TREE data.dali.hw_decoder_load=0 data.dali.num_threads=12 data.dali.cpu_decode_share=0.25
prof dist2_dali dist=1n2g data=dali data.root=$TREE
python3 benchmarks/scripts/ddp_trace.py $R/q/*_trace.json.gz > $R/q/ddp_trace.txt 2>&1
log "all done"
touch $R/ALL_DONE
