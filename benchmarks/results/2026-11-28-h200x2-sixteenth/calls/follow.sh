cd /tmp/repo; R=/tmp/res; exec >> $R/orch.log 2>&1
while [ ! -e $R/ALL_DONE ]; do sleep 2; done
A=(train=accuracy train.epochs=6 train.lr_warmup_epochs=1 data=dali data.root=/tmp/imagenet)
run1() { n=$1; shift; s=$SECONDS; mkdir -p $R/h/$n; timeout 200 python3 -m rn50 "$@" hydra.run.dir=/tmp/work/$n > $R/h/$n.log 2>&1
  echo "[follow] $n: exit $? in $((SECONDS-s)) s: python -m rn50 $*"; cp /tmp/work/$n/summary.json $R/h/$n.json; cp /tmp/work/$n/epochs.jsonl $R/h/$n.epochs.jsonl; }
run1 acc2_nocache dist=1n2g "${A[@]}"
run1 acc2_cache dist=1n2g "${A[@]}" data.dali.cache_size_mb=8000
run1 acc2_cache_half dist=1n2g "${A[@]}" data.dali.cache_size_mb=1300
run1 acc1_nocache "${A[@]}"
run1 acc1_cache "${A[@]}" data.dali.cache_size_mb=8000
run1 acc2_nocache_again dist=1n2g "${A[@]}"
echo "[follow] done"; touch $R/FOLLOW_DONE
