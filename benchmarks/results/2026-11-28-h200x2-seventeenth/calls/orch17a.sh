#!/usr/bin/env bash
# Seventeenth session, 2 GPUs (no 4-GPU kind lent): DDP's per-step buffer broadcast (dist.broadcast_buffers) with
# data=dali and synthetic data, rn50 against the bare loop over NVLink and sockets, and a 2-GPU train=accuracy run.
. benchmarks/scripts/device_session.sh
mkdir -p $R/a $R/d
S=(dist=1n2g bench.repeats=3)
D=(dist=1n2g bench.repeats=3 data=dali data.root=$TREE)
one $R/a syn_bbtrue 100 "${S[@]}" dist.broadcast_buffers=true
one $R/a syn_bbfalse 100 "${S[@]}"
ready
one $R/a dali_bbtrue_1 120 "${D[@]}" dist.broadcast_buffers=true
one $R/a dali_bbfalse_1 120 "${D[@]}"
one $R/a dali_bbtrue_2 120 "${D[@]}" dist.broadcast_buffers=true
one $R/a dali_bbfalse_2 120 "${D[@]}"
one $R/a syn_bbtrue_2 100 "${S[@]}" dist.broadcast_buffers=true
one $R/a syn_bbfalse_2 100 "${S[@]}"
one $R/a dali_bbfalse_prof 120 dist=1n2g bench.repeats=2 data=dali data.root=$TREE profiler=pytorch
mkdir -p $R/c
for bb in "" --broadcast-buffers; do  # the bare loop on rn50's DALI pipeline (a data root has slashes: not a ddp_gpu.sh case)
  n=bare_dali${bb:+_bbtrue}; s=$(now)
  [ "$(left)" -gt 120 ] || { log "$n: skipped"; continue; }
  PYTHONPATH=$PWD timeout 150 python3 -m torch.distributed.run --standalone --nproc-per-node 2 -m rn50.baseline \
    --repeats 3 --data-root $TREE $bb 2> $R/c/$n.log | tail -n 1 > $R/c/$n.json
  log "$n: exit $? in $(( $(now) - s )) s"
done
python3 -m rn50.fake_imagenet /tmp/learn --classes 10 --train-per-class 256 --val-per-class 20 --learnable > $R/d/learn.txt 2>&1
L=(dist=1n2g train=accuracy precision=amp data=imagefolder data.root=/tmp/learn data.image_size=64 data.batch_size=64
   train.epochs=10 train.lr_warmup_epochs=1 train.target_top1=0.95)
one $R/d learn_bbfalse 200 "${L[@]}"
REPEATS=3 phase B 200 $R/b nvl:2:bare nvl:2:rn50 nvl:2:bare:broadcast_buffers=true nvl:2:rn50:dist.broadcast_buffers=true \
  sock:2:bare sock:2:rn50 sock:2:bare:broadcast_buffers=true sock:2:rn50:dist.broadcast_buffers=true
log "all done"
touch $R/ALL_DONE
