set -u
t0=$SECONDS
python3 -m pip install -q --no-index --find-links .carry/wh rn50 > $OUT/install.log 2>&1; python3 -m pip install -q --force-reinstall --no-deps --no-index --find-links .carry/wh rn50 >> $OUT/install.log 2>&1; echo "install $((SECONDS-t0)) s"
python3 -c "import rn50.recipe.optimizers as o, inspect; print('repeat_interleave' in inspect.getsource(o), 'index_select' in inspect.getsource(o))"
PYTHONPATH=. timeout 120 python3 benchmarks/lars_step.py > $OUT/lars_step.jsonl 2> $OUT/lars_step.err; echo "lars_step rc=$? at $((SECONDS-t0)) s"; head -3 $OUT/lars_step.jsonl
timeout 100 python3 -m pytest -p no:cacheprovider -n 0 -m gpu -q tests/unit/test_lars.py > $OUT/pytest_gpu.log 2>&1; echo "pytest rc=$?"; tail -1 $OUT/pytest_gpu.log
mkdir -p /tmp/w && cd /tmp/w
for name in mlperf_lars_map mlperf_sgd_map; do
  extra=""; [ $name = mlperf_sgd_map ] && extra="optim.name=sgd optim.lr=0.1"
  timeout 200 python3 -m rn50 experiment=mlperf $extra hydra.run.dir=/tmp/w/$name > $OUT/$name.log 2>&1; echo "$name rc=$? at $((SECONDS-t0)) s"
  cp /tmp/w/$name/summary.json $OUT/$name.json 2>/dev/null; grep "images/sec (" $OUT/$name.log | tail -1 | cut -c1-330
done
