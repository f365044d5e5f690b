set -u
t0=$SECONDS
python3 -c "import rn50" 2>/dev/null || python3 -m pip install -q --no-index --find-links .carry/wh rn50 > $OUT/install.log 2>&1
cd /tmp/w
timeout 560 python3 -m rn50 experiment=fastest profiler=pytorch hydra.run.dir=/tmp/w/fastest_prof > $OUT/fastest_prof.log 2>&1; echo "fastest_prof rc=$? at $((SECONDS-t0)) s"
cp /tmp/w/fastest_prof/summary.json $OUT/fastest_prof.json 2>/dev/null
ls /tmp/w/fastest_prof | head -30
find /tmp/w/fastest_prof -name "*.csv" -size -2M | head -5 | xargs -I{} cp {} $OUT/ 2>/dev/null
grep -iE "images/sec \(|busy|share|categor" $OUT/fastest_prof.log | tail -12
