# the call after orch6.sh's deadline (its last run, fastest4_imagefolder, had 71 s left: stopped), run from /tmp/repo:
# a second throughput run of data=dali with the decoded-image cache at 4 GPUs, then everything back as res.tgz
pkill -f "[o]rch6.sh"; pkill -f "[r]n50 experiment=fastest"; sleep 3; pkill -9 -f "[p]ython3 -m rn50 experiment"; sleep 2
cd /tmp/repo && export PYTHONUNBUFFERED=1 && timeout 85 python3 -m rn50 dist=1n4g bench.repeats=3 data=dali \
  data.root=/tmp/imagenet data.dali.cache_size_mb=8000 hydra.run.dir=/tmp/work/dist4_dali_cache_2 \
  > /tmp/res/f/dist4_dali_cache_2.log 2>&1
cp /tmp/work/dist4_dali_cache_2/summary.json /tmp/res/f/dist4_dali_cache_2.json
(cd /tmp/work/dist4_dali_cache_2 && cp --parents $(find . -name 'rank*.log') /tmp/res/f/ 2>/dev/null)
tar czf $OUT/res.tgz -C /tmp res
