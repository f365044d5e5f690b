#!/usr/bin/env bash
# Twenty-first session, 4 GPUs (issues 42 and 44), in priority order so that the deadline cuts the least needed:
# A  the 1-GPU references of experiment=fastest's scaling, side by side, cold: rn50 on GPU 0, the compiled bare loop
#    (the same step: batch 512, compiled, CUDA graphs, kernel tuning) on GPU 1; ImageFolder at the fastest settings
#    on GPU 2 (issue 44; its 8 workers take 8 of the 64 cores while the references time their windows).
# B  rn50 experiment=fastest at 4 (its kernels tuned in A: the same graph split at DDP's buckets)
# C  the compiled bare loop at 4, cold
# D  the bare loop at 4 again, then rn50 again: rn50, bare, bare, rn50 (a drift favours neither)
# F  data=dali at the defaults at 4 beside synthetic, and with the decoded-image cache (10,000 JPEGs: the
#    bench's 340 steps of 1,024 are 35 epochs, so the cache holds each rank's shard after the first)
# I  ImageFolder at experiment=fastest at 4
# H  the cache over train=accuracy at 4 on a learnable set of 19,200 JPEGs at batch 64 a GPU (75 steps an epoch)
# E  the 1-GPU references again, both on GPU 0, warm
# Deadline: seconds from this script's start in /tmp/end_s.
DALI_PARTS=${DALI_PARTS:-5}
. benchmarks/scripts/device_session.sh
FAST=batch_size=512,compile=true,compile_mode=reduce-overhead,autotune_pointwise=true,autotune_coordinate_descent=true
( nice python3 -m rn50.fake_imagenet /tmp/learn --classes 24 --train-per-class 800 --val-per-class 20 --learnable \
    2>&1 | tail -n 1 > "$R/learn.txt"; touch /tmp/learn.ok; log "learn: $(cat "$R/learn.txt")" ) &
mkdir -p $R/i $R/f $R/h
REPEATS=3 phase A0 300 $R/a0 "nvl:1:rn50:experiment=fastest,CUDA_VISIBLE_DEVICES=0" & pa0=$!
REPEATS=3 phase A1 300 $R/a1 "nvl:1:bare:$FAST,CUDA_VISIBLE_DEVICES=1" & pa1=$!
( while [ ! -e /tmp/tree.ok ]; do sleep 2; done
  CUDA_VISIBLE_DEVICES=2 one $R/i fastest1_imagefolder 480 experiment=fastest bench.repeats=3 data=imagefolder \
    data.root=$TREE ) & pi1=$!
wait $pa0 $pa1 $pi1  # not the DALI unpack, which waits for later calls
REPEATS=3 phase B 240 $R/b "nvl:4:rn50:experiment=fastest"
REPEATS=3 phase C 200 $R/c "nvl:4:bare:$FAST"
REPEATS=3 phase D 200 $R/d "nvl:4:bare:$FAST,RUN=2" "nvl:4:rn50:experiment=fastest,RUN=2"
ready
if [ -e /tmp/dali.ok ]; then
  one $R/f dist4_synthetic 100 dist=1n4g bench.repeats=3
  one $R/f dist4_dali 120 dist=1n4g bench.repeats=3 data=dali data.root=$TREE
  one $R/f dist4_dali_cache 120 dist=1n4g bench.repeats=3 data=dali data.root=$TREE data.dali.cache_size_mb=8000
fi
one $R/i fastest4_imagefolder 330 experiment=fastest dist=1n4g bench.repeats=3 data=imagefolder data.root=$TREE
while [ ! -e /tmp/learn.ok ]; do sleep 2; done
if [ -e /tmp/dali.ok ]; then
  for c in nocache cache; do x=(); [ $c = cache ] && x=(data.dali.cache_size_mb=8000)
    one $R/h acc4_$c 150 dist=1n4g train=accuracy train.epochs=12 train.lr_warmup_epochs=2 data.batch_size=64 \
      optim.lr=0.1 data=dali data.root=/tmp/learn "${x[@]}"; done
fi
REPEATS=3 phase E 150 $R/e "nvl:1:rn50:experiment=fastest,CUDA_VISIBLE_DEVICES=0,RUN=2" \
  "nvl:1:bare:$FAST,CUDA_VISIBLE_DEVICES=0,RUN=2"
log "all done"
touch $R/ALL_DONE
