cd /tmp/repo; R=/tmp/res; exec >> $R/orch.log 2>&1
while [ ! -e $R/FOLLOW_DONE ]; do sleep 2; done
mkdir -p $R/p
for n in dali synthetic; do
  extra=(); [ $n = dali ] && extra=(data=dali data.root=/tmp/imagenet)
  s=$SECONDS; timeout 200 python3 -m rn50 dist=1n2g bench.repeats=2 profiler=pytorch "${extra[@]}" hydra.run.dir=/tmp/work/p_$n > $R/p/$n.log 2>&1
  echo "[follow2] p_$n: exit $? in $((SECONDS-s)) s"; cp /tmp/work/p_$n/summary.json $R/p/$n.json
  find /tmp/work/p_$n -name '*.json.gz' -o -name '*.txt' | head; cp /tmp/work/p_$n/trace*.json.gz $R/p/ 2>/dev/null
  for f in /tmp/work/p_$n/trace*.json.gz; do cp $f $R/p/${n}_$(basename $f); done
done
echo "[follow2] done"; touch $R/FOLLOW2_DONE
