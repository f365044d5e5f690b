# call 4: DALI from the stashed chunks into the image's site-packages; synthetic, dali and imagefolder
# at 1 GPU and at every GPU of the host
t0=$SECONDS
. .carry/plan/common.sh
stash .carry/d4
site=$(python3 -c 'import os,torch;print(os.path.dirname(os.path.dirname(torch.__file__)))')
cat /tmp/dchunks/dsite.tar.xz.part-* | xz -dc -T0 | tar xf - -C "$site" || exit 1
python3 -c 'import nvidia.dali as d, nvidia.dali.fn; print("dali", d.__version__)' || exit 1
THREADS=1 BUDGET_S=$((570 - SECONDS + t0)) bash benchmarks/scripts/dali_gpu.sh /tmp/res/c4 "defaults dist"
pack c4
