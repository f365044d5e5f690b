#!/usr/bin/env bash
# Issue 44 on 4 GPUs, with the session's last device minutes: data=dali's new default (hw_decoder_load=0.65)
# against the one before (0.99) at dist=1n4g, with synthetic as the reference, 3 windows each.
set -u
R=/tmp/res4; mkdir -p $R; exec >> $R/orch.log 2>&1
T0=$(date +%s); now() { echo $(( $(date +%s) - T0 )); }; log() { echo "[$(now) s] $*"; }
left() { local end=420; [ -s /tmp/end_s ] && end=$(cat /tmp/end_s); echo $(( end - $(now) )); }
TREE=/tmp/imagenet; export PYTHONUNBUFFERED=1
log "start: $(nvidia-smi -L | tr '\n' ';') cpus $(nproc)"
( while ! { [ -e /tmp/dchunks/done-1 ] && [ -e /tmp/dchunks/done-2 ] && [ -e /tmp/dchunks/done-3 ] \
      && [ -e /tmp/dchunks/done-4 ]; }; do sleep 2; done
  site=$(python3 -c 'import os,torch;print(os.path.dirname(os.path.dirname(torch.__file__)))')
  cat /tmp/dchunks/dsite.tar.xz.part-* | xz -dc -T0 | tar xf - -C "$site" && touch /tmp/dali.ok
  log "dali: $( [ -e /tmp/dali.ok ] && echo installed || echo FAILED)" ) &
( python3 -m rn50.fake_imagenet $TREE --classes 100 --train-per-class 100 --val-per-class 1 2>&1 | tail -n 1 \
    > $R/fake_imagenet.txt; touch /tmp/tree.ok; log "jpegs: $(cat $R/fake_imagenet.txt)" ) &
one() {  # NAME overrides...
  local n=$1; shift; local s; s=$(now)
  [ "$(left)" -gt 60 ] || { log "$n: skipped, $(left) s left"; return; }
  timeout $(( $(left) - 5 )) python3 -m rn50 dist=1n4g bench.repeats=3 "$@" hydra.run.dir=/tmp/work/$n > $R/$n.log 2>&1
  log "$n: exit $? in $(( $(now) - s )) s: python -m rn50 dist=1n4g bench.repeats=3 $*"
  cp /tmp/work/$n/summary.json $R/$n.json 2>/dev/null
}
one dist4_synthetic
while ! { [ -e /tmp/dali.ok ] && [ -e /tmp/tree.ok ]; }; do sleep 2; [ "$(now)" -gt 200 ] && break; done
one dist4_dali data=dali data.root=$TREE
one dist4_dali_hw099 data=dali data.root=$TREE data.dali.hw_decoder_load=0.99
one dist4_dali_again data=dali data.root=$TREE
log "all done"; touch $R/ALL_DONE
