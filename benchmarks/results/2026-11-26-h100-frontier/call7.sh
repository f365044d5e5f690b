set -u
t0=$SECONDS
python3 -c "import rn50" 2>/dev/null || python3 -m pip install -q --no-index --find-links .carry/wh rn50 > $OUT/install.log 2>&1; echo "install $((SECONDS-t0)) s"
mkdir -p /tmp/w && cd /tmp/w
for name in mlperf_lars_final mlperf_sgd_final; do
  extra=""; [ $name = mlperf_sgd_final ] && extra="optim.name=sgd optim.lr=0.1"
  timeout 250 python3 -m rn50 experiment=mlperf $extra hydra.run.dir=/tmp/w/$name > $OUT/$name.log 2>&1; echo "$name rc=$? at $((SECONDS-t0)) s"
  cp /tmp/w/$name/summary.json $OUT/$name.json 2>/dev/null; grep "images/sec (" $OUT/$name.log | tail -1 | cut -c1-330
done
