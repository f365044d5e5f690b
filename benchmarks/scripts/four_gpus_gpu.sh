#!/usr/bin/env bash
# What issues 42 and 44 still had to measure on a 4-GPU host after the twenty-first session, as one background
# script on a warm machine, in priority order so that the deadline cuts the least needed (docs/benchmarks.md,
# "4 H200s: experiment=fastest's scaling against the compiled bare loop ..."; the closing note of 2026-11-28):
# A  experiment=fastest on each of the 4 GPUs alone, all four side by side and cold: every card's 1-GPU figure and
#    clock under the power its neighbours draw, as in a 4-GPU run (the slowest card sets DDP's step)
# B  experiment=fastest at 4, cold, then again on its cache: the second start against issue 42's 60 s, read with
#    its time/startup_<stage>_s; then a third, one window: on one H200 the second start compiled 110 Triton
#    kernels in-process (16 s) that the third found in Triton's cache (twenty-second session). The image holds no
#    bytecode, so since 5583109 rn50 keeps Python's in ~/.cache/rn50/pycache: A's runs write it and B's read it,
#    where the twenty-first session's 62.5 s had none (each run's tag python_bytecode says which)
# E  ImageFolder at experiment=fastest at 4 (the same graphs as synthetic's: B's cache)
# F  the decoded-image cache over train=accuracy at 4 on a learnable set (75 steps an epoch), without and with
# G  profiles of data=dali and of synthetic data at 4 (rank 0, 5 steps after 2 windows; read with ddp_trace.py):
#    what holds the host back with DALI (its lead 8 ms against synthetic's 39 in the twenty-first session)
# Usage, the first call of the session (carrying .carry/wh and DALI's first part .carry/d1; the next parts, of
# benchmarks/scripts/dali_parts.sh, follow a call each into /tmp/dchunks with done-N, DALI_PARTS of them):
#   echo 1450 > /tmp/end_s; bash benchmarks/scripts/device_start.sh benchmarks/scripts/four_gpus_gpu.sh
# Results in /tmp/res (R): orch.log, one folder a phase; ALL_DONE at the end.
DALI_PARTS=${DALI_PARTS:-5}
. benchmarks/scripts/device_session.sh
( nice python3 -m rn50.fake_imagenet /tmp/learn --classes 24 --train-per-class 800 --val-per-class 20 --learnable \
    2>&1 | tail -n 1 > "$R/learn.txt"; touch /tmp/learn.ok; log "learn: $(cat "$R/learn.txt")" ) &
mkdir -p "$R/a" "$R/b" "$R/e" "$R/f" "$R/g"
pids=()
for gpu in 0 1 2 3; do
  CUDA_VISIBLE_DEVICES=$gpu one "$R/a" "fastest1_gpu$gpu" 420 experiment=fastest bench.repeats=3 & pids+=($!)
done
wait "${pids[@]}"  # not the DALI unpack, which waits for later calls
# Triton's cache metadata after each start (its .json files, a few MB): which kernels a start compiled again,
# and what in their keys differs from the cold run's entries of the same name
triton_meta() { (cd "$TORCHINDUCTOR_CACHE_DIR" && find triton -name '*.json' | tar czf "$R/b/triton_$1.tgz" -T -); }
one "$R/b" fastest4 420 experiment=fastest dist=1n4g bench.repeats=3; triton_meta cold
one "$R/b" fastest4_again 150 experiment=fastest dist=1n4g bench.repeats=3; triton_meta again
one "$R/b" fastest4_third 120 experiment=fastest dist=1n4g bench.repeats=1
one "$R/e" fastest4_imagefolder 300 experiment=fastest dist=1n4g bench.repeats=3 data=imagefolder data.root="$TREE"
ready
while [ ! -e /tmp/learn.ok ]; do sleep 2; done
if [ -e /tmp/dali.ok ]; then
  for c in nocache cache; do x=(); [ $c = cache ] && x=(data.dali.cache_size_mb=8000)
    one "$R/f" "acc4_$c" 150 dist=1n4g train=accuracy train.epochs=12 train.lr_warmup_epochs=2 data.batch_size=64 \
      optim.lr=0.1 data=dali data.root=/tmp/learn "${x[@]}"; done
  one "$R/g" dist4_dali_profile 120 dist=1n4g bench.repeats=2 profiler=pytorch data=dali data.root="$TREE"
fi
one "$R/g" dist4_synthetic_profile 100 dist=1n4g bench.repeats=2 profiler=pytorch
log "all done"
touch "$R/ALL_DONE"
