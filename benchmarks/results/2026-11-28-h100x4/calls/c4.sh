# call 4: DALI from the stashed parts into the image's site-packages; at every GPU of the host: synthetic,
# dali at the defaults, and the levers one at a time (hardware decoder, no CPU share, fewer threads)
t0=$SECONDS
. .carry/plan/common.sh
stash .carry/d4
site=$(python3 -c 'import os,torch;print(os.path.dirname(os.path.dirname(torch.__file__)))')
cat /tmp/dchunks/dsite.tar.xz.part-* | xz -dc -T0 | tar xf - -C "$site" || exit 1
python3 -c 'import nvidia.dali as d, nvidia.dali.fn; print("dali", d.__version__)' || exit 1
THREADS=1 DIST_DATA="synthetic dali" DIST_LEVERS="hw_decoder_load=0.99 hw_decoder_load=0.99,cpu_decode_share=0 hw_decoder_load=0.65,cpu_decode_share=0 num_threads=8" \
  BUDGET_S=$((580 - SECONDS + t0)) bash benchmarks/scripts/dali_gpu.sh /tmp/res/c4 "dist distlevers"
pack c4
