set -u
t0=$SECONDS
python3 -m pip install -q --no-index --find-links .carry/wh rn50 > $OUT/install.log 2>&1; echo "install rc=$? $((SECONDS-t0)) s"
BARE_GPUS="1 2 4" timeout 540 bash benchmarks/sweep_gpu.sh $OUT dist=1n1g,1n2g,1n4g 2>&1 | tail -n 30
echo "done at $((SECONDS-t0)) s"
