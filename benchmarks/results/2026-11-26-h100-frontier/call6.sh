set -u
t0=$SECONDS
python3 -m pip install -q --no-index --find-links .carry/wh rn50 > $OUT/install.log 2>&1; echo "install rc=$? $((SECONDS-t0)) s"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/env.txt
timeout 200 python3 -m pytest -p no:cacheprovider -n 0 -m gpu -q -rs tests/unit/test_lars.py tests/unit/test_trained.py > $OUT/pytest_gpu.log 2>&1
echo "pytest gpu rc=$? at $((SECONDS-t0)) s"; tail -n 2 $OUT/pytest_gpu.log
PYTHONPATH=. timeout 200 python3 benchmarks/lars_step.py > $OUT/lars_step.jsonl 2> $OUT/lars_step.err; echo "lars_step rc=$? at $((SECONDS-t0)) s"
cat $OUT/lars_step.jsonl; tail -3 $OUT/lars_step.err
