#!/usr/bin/env bash
# Sixteenth session, 4 GPUs (issues 42 and 44). Priority order, so what the deadline cuts is the least needed:
# D amp sweep between bare runs (the 0.985 once); B/C fastest 1n4g cold then its second start (rn50's own
# warm-start code, no TORCHINDUCTOR_* but the cache dir); F two torchrun nodes of 2 over sockets, twice;
# G data=dali x2, a prefetch lever, imagefolder, synthetic at 4; H the decoded-image cache over train=accuracy;
# E bf16 sweep + bare. Deadline: seconds from this script's start in /tmp/end_s.
GATE=/tmp/go_unpack  # DALI's unpack and the JPEG tree wait for B's compile
. benchmarks/scripts/device_session.sh
REPEATS=3 phase D 250 $R/d nvl:4:bare "nvl:4:sweep:dist=1n1g|1n2g|1n4g" nvl:4:bare:RUN=2
touch /tmp/go_unpack
REPEATS=3 phase B 420 $R/b nvl:4:rn50:experiment=fastest
REPEATS=1 phase C 120 $R/c "nvl:4:rn50:experiment=fastest,RUN=2"
REPEATS=3 phase F 200 $R/f sock:4:bare sock:4:2x2 "sock:4:bare:RUN=2" "sock:4:2x2:RUN=2"
if [ -e /tmp/dali.ok ] && [ -e /tmp/tree.ok ]; then
  mkdir -p $R/g $R/h
  one $R/g dist4_synthetic 100 dist=1n4g bench.repeats=3
  for n in 1 2; do one $R/g dist4_dali_$n 120 dist=1n4g bench.repeats=3 data=dali data.root=$TREE; done
  one $R/g dist4_dali_prefetch5 120 dist=1n4g bench.repeats=3 data=dali data.root=$TREE data.dali.prefetch_queue_depth=5
  one $R/g dist4_imagefolder 150 dist=1n4g bench.repeats=3 data=imagefolder data.root=$TREE
  one $R/h acc4_nocache 150 dist=1n4g train=accuracy train.epochs=8 train.lr_warmup_epochs=1 data=dali data.root=$TREE
  one $R/h acc4_cache 150 dist=1n4g train=accuracy train.epochs=8 train.lr_warmup_epochs=1 data=dali data.root=$TREE data.dali.cache_size_mb=8000
else log "g, h: skipped, dali $( [ -e /tmp/dali.ok ] && echo ok || echo missing) tree $( [ -e /tmp/tree.ok ] && echo ok || echo missing)"; fi
REPEATS=3 phase E 200 $R/e "nvl:4:sweep:dist=1n1g|1n2g|1n4g,precision=bf16" nvl:4:bare:precision=bf16
log "all done"
touch $R/ALL_DONE
