#!/usr/bin/env bash
# Seventeenth session, second 2x H200 machine (the first went idle): dist.broadcast_buffers, rn50 against the bare loop
# over NVLink and sockets, and a 2-GPU train=accuracy run on a learnable set. No DALI needed.
. benchmarks/scripts/device_session.sh
mkdir -p $R/d
python3 -m rn50.fake_imagenet /tmp/learn --classes 10 --train-per-class 256 --val-per-class 20 --learnable > $R/d/learn.txt 2>&1
L=(dist=1n2g train=accuracy precision=amp data=imagefolder data.root=/tmp/learn data.image_size=64 data.batch_size=64
   train.epochs=10 train.lr_warmup_epochs=1 train.target_top1=0.95)
REPEATS=3 phase B 200 $R/b nvl:2:bare nvl:2:rn50 nvl:2:bare:broadcast_buffers=true nvl:2:rn50:dist.broadcast_buffers=true \
  sock:2:bare sock:2:rn50 sock:2:bare:broadcast_buffers=true sock:2:rn50:dist.broadcast_buffers=true
one $R/d learn_bbfalse 150 "${L[@]}"
log "all done"
touch $R/ALL_DONE
