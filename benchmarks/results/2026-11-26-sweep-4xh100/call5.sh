set -u
t0=$SECONDS
python3 -c "import rn50" 2>/dev/null || python3 -m pip install -q --no-index --find-links .carry/wh rn50 > $OUT/install.log 2>&1; echo "install $((SECONDS-t0)) s"
timeout 560 bash benchmarks/sweep_gpu.sh $OUT dist=1n1g,1n2g,1n4g precision=amp,bf16 bench.repeats=5 2>&1 | tail -n 14
echo "done at $((SECONDS-t0)) s"
