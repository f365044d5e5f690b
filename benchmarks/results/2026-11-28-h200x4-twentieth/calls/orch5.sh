#!/usr/bin/env bash
# Twentieth session, 4 GPUs (issues 42 and 44), in priority order so that the deadline cuts the least needed:
# A sockets at 4: rn50 as two torchrun nodes of 2 against the bare loop as the same two nodes (bare2x2), in the
#   order bare, rn50, rn50, bare (a steady drift of the network favours neither), each run timing its all-reduce
#   alone (the bare loop too since 2026-11-28); B experiment=fastest at 4 GPUs on synthetic data and on data=dali
#   (issue 44's fastest at 4; two cold compiles of about 5 min); E bf16 sweep + bare at 4; H the decoded-image cache
#   over train=accuracy at 4 on a learnable set (the random-label set diverged at 4); G data=dali's levers at 4
#   without the hardware decoder; F experiment=fastest at 1 GPU (the scaling reference); A2 sockets again.
# Deadline: seconds from this script's start in /tmp/end_s.
GATE=/tmp/go_unpack
. benchmarks/scripts/device_session.sh
# Sockets over loopback are CPU-bound: nothing else runs beside phase A (the unpack and the JPEGs wait for it).
REPEATS=3 phase A 260 $R/a sock:4:bare2x2 sock:4:2x2 "sock:4:2x2:RUN=2" "sock:4:bare2x2:RUN=2"
touch /tmp/go_unpack
( nice python3 -m rn50.fake_imagenet /tmp/learn --classes 24 --train-per-class 400 --val-per-class 10 --learnable \
    2>&1 | tail -n 1 > "$R/learn.txt"; touch /tmp/learn.ok ) &
t=$(now)  # device_session.sh's ready gives up 400 s from the start: phase A may take most of that
while { [ ! -e /tmp/dali.ok ] || [ ! -e /tmp/tree.ok ]; } && [ $(( $(now) - t )) -lt 150 ]; do sleep 2; done
log "dali $( [ -e /tmp/dali.ok ] && echo ok) tree $( [ -e /tmp/tree.ok ] && echo ok)"
mkdir -p $R/b $R/h $R/g
if [ -e /tmp/dali.ok ]; then
  one $R/b fastest4 420 experiment=fastest dist=1n4g bench.repeats=3
  one $R/b fastest4_dali 480 experiment=fastest dist=1n4g bench.repeats=3 data=dali data.root=$TREE
else log "b: skipped, dali missing"; fi
REPEATS=3 phase E 200 $R/e "nvl:4:sweep:dist=1n1g|1n2g|1n4g,precision=bf16" nvl:4:bare:precision=bf16
REPEATS=3 phase E2 150 $R/e2 sock:4:bare:precision=bf16 sock:4:rn50:precision=bf16  # issue 42's bf16 target on sockets
while [ ! -e /tmp/learn.ok ]; do sleep 2; done
if [ -e /tmp/dali.ok ]; then
  for c in nocache cache nocache_2; do x=(); [ $c = cache ] && x=(data.dali.cache_size_mb=8000)
    one $R/h acc4_$c 150 dist=1n4g train=accuracy train.epochs=8 train.lr_warmup_epochs=2 optim.lr=0.05 \
      data=dali data.root=/tmp/learn "${x[@]}"; done
  one $R/g dist4_synthetic 100 dist=1n4g bench.repeats=3
  one $R/g dist4_dali 120 dist=1n4g bench.repeats=3 data=dali data.root=$TREE
  one $R/g dist4_dali_hybrid6 120 dist=1n4g bench.repeats=3 data=dali data.root=$TREE data.dali.hw_decoder_load=0
  one $R/g dist4_dali_hybrid8 120 dist=1n4g bench.repeats=3 data=dali data.root=$TREE data.dali.hw_decoder_load=0 \
    data.dali.num_threads=8
fi
one $R/b fastest1 420 experiment=fastest bench.repeats=3
REPEATS=3 phase A2 260 $R/a2 sock:4:bare2x2 sock:4:2x2 "sock:4:2x2:RUN=2" "sock:4:bare2x2:RUN=2" sock:4:bare
one $R/b fastest4_imagefolder 480 experiment=fastest dist=1n4g bench.repeats=3 data=imagefolder data.root=$TREE
log "all done"
touch $R/ALL_DONE
