set -u
t0=$SECONDS
python3 -c "import rn50" 2>/dev/null || python3 -m pip install -q --no-index --find-links .carry/wh rn50 > $OUT/install.log 2>&1
[ -d /tmp/site/cudnn ] || python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .carry/fe/nvidia_cudnn_frontend-*.whl
timeout 150 python3 -m pytest -p no:cacheprovider -n 0 -m gpu -q -rs tests/unit/test_trained.py tests/unit/test_lars.py > $OUT/pytest_gpu.log 2>&1
echo "pytest gpu rc=$? at $((SECONDS-t0)) s"; tail -n 3 $OUT/pytest_gpu.log
PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1 timeout 120 python3 benchmarks/fusion_probe.py --batch 512 > $OUT/probe512.jsonl 2> $OUT/probe512.err
echo "probe512 rc=$? at $((SECONDS-t0)) s"; tail -n 1 $OUT/probe512.err
cd /tmp/w
for name in mlperf_sgd mlperf_lars_2; do
  left=$((570 - SECONDS)); [ $left -lt 60 ] && { echo "$name skipped"; continue; }
  extra=""; [ $name = mlperf_sgd ] && extra="optim.name=sgd optim.lr=0.1"
  timeout $left python3 -m rn50 experiment=mlperf $extra hydra.run.dir=/tmp/w/$name > $OUT/$name.log 2>&1; echo "$name rc=$? at $((SECONDS-t0)) s"
  cp /tmp/w/$name/summary.json $OUT/$name.json 2>/dev/null; grep "images/sec (" $OUT/$name.log | tail -1
done
