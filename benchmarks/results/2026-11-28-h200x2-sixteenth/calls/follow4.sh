cd /tmp/repo; R=/tmp/res; exec >> $R/orch.log 2>&1
while [ ! -e $R/FOLLOW3_DONE ]; do sleep 2; done
n=dist2_dali_cache; s=$SECONDS; mkdir -p $R/g/$n
timeout 150 python3 -m rn50 dist=1n2g bench.repeats=3 data=dali data.root=/tmp/imagenet data.dali.cache_size_mb=8000 hydra.run.dir=/tmp/work/$n > $R/g/$n.log 2>&1
echo "[follow4] $n: exit $? in $((SECONDS-s)) s"; cp /tmp/work/$n/summary.json $R/g/$n.json; touch $R/FOLLOW4_DONE
