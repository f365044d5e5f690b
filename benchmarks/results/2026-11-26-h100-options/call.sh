set -u
t0=$SECONDS
python3 -m pip install -q --no-index --find-links .carry/wh rn50 > $OUT/install.log 2>&1; echo "install rc=$? $((SECONDS-t0)) s"
OLD=.carry/old BUDGET_S=$((570 - SECONDS)) bash benchmarks/trains_gpu.sh $OUT/r1 core 2>&1 | tail -n 30
echo "done at $((SECONDS-t0)) s"
