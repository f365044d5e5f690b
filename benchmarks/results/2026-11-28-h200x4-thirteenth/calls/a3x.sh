# sent by hand as call 5 (setsid), after orch.sh's phase A skipped its GPU 3 job (its wait_dali returned the
# status of its loop's last test, 1, once DALI was there): experiment=fastest data=dali on GPU 3, and the
# DALI gpu test on GPU 0 once a0's experiment=fastest was done (orch.sh's a0 ran the same test at the same time)
R=/tmp/res; mkdir -p $R/a3/fastest_dali
( export TORCHINDUCTOR_CACHE_DIR=/root/.cache/rn50/torchinductor CUDA_VISIBLE_DEVICES=3 PYTHONUNBUFFERED=1
  s=$(date +%s); timeout 560 python3 -m rn50 experiment=fastest data=dali data.root=/tmp/imagenet bench.repeats=3 hydra.run.dir=/tmp/work/fastest_dali > $R/a3/fastest_dali.log 2>&1
  echo "$(date +%T) fastest_dali exit $? in $(( $(date +%s) - s )) s" >> $R/a3x.log
  cp /tmp/work/fastest_dali/summary.json $R/a3/fastest_dali.json; (cd /tmp/work/fastest_dali && cp --parents $(find . -name 'rank*.log') $R/a3/fastest_dali/) ) &
( until grep -q "a0: fastest done" $R/orch.log; do sleep 5; done
  export CUDA_VISIBLE_DEVICES=0 PYTHONUNBUFFERED=1; s=$(date +%s)
  timeout 300 python3 -m pytest -m gpu tests/e2e/test_dali_gpu.py -q -s -p no:cacheprovider > $R/a0/pytest_dali_gpu.txt 2>&1
  echo "$(date +%T) pytest exit $? in $(( $(date +%s) - s )) s" >> $R/a3x.log ) &
wait
