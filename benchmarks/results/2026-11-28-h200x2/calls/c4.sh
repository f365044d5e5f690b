# call 4: DALI from the stashed parts; experiment=fastest at 1 GPU with synthetic data, with data=dali as the
# preset sets it, and with the hardware decoder alone (no CPU share); then the gpu test of data=dali
t0=$SECONDS
. benchmarks/results/2026-11-28-h200x2/calls/common.sh
stash .carry/d4
site=$(python3 -c 'import os,torch;print(os.path.dirname(os.path.dirname(torch.__file__)))')
cat /tmp/dchunks/dsite.tar.xz.part-* | xz -dc -T0 | tar xf - -C "$site" || exit 1
python3 -c 'import nvidia.dali as d, nvidia.dali.fn; print("dali", d.__version__)' || exit 1
CUDA_VISIBLE_DEVICES=0 THREADS=1 LEVERS="hw_decoder_load=0.99,cpu_decode_share=0" \
  BUDGET_S=$((${C4_DALI_S:-330} - SECONDS + t0)) bash benchmarks/scripts/dali_gpu.sh /tmp/res/c4 "fastest levers"
left=$((${C4_S:-560} - SECONDS + t0))
if [ "$left" -gt 150 ]; then
  CUDA_VISIBLE_DEVICES=0 timeout $left python3 -m pytest -m gpu tests/e2e/test_dali_gpu.py -q -s -p no:cacheprovider \
    2>&1 | tail -n 25 | tee /tmp/res/c4/pytest_dali_gpu.txt
else echo "pytest: skipped, $left s left" | tee /tmp/res/c4/pytest_dali_gpu.txt; fi
pack c4
