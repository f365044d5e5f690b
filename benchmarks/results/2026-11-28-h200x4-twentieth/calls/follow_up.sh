# The two calls after orch5.sh's deadline, on the same warm machine (rn50 at 31853b6 from the wheelhouse).
# 1. data=dali at 4 GPUs without the hardware decoder (hybrid nvJPEG: Huffman on the rank's 6 threads, the rest on the GPU):
cd /tmp/repo && n=dist4_dali_hybrid6 && s=$SECONDS && timeout 170 python3 -m rn50 dist=1n4g bench.repeats=3 data=dali \
  data.root=/tmp/imagenet data.dali.hw_decoder_load=0 hydra.run.dir=/tmp/work/$n > /tmp/$n.log 2>&1
echo "exit $? in $((SECONDS-s)) s"; mkdir -p $OUT/g; cp /tmp/$n.log $OUT/g/; cp /tmp/work/$n/summary.json $OUT/g/$n.json
# 2. A third socket pair, rn50 first (the six socket runs then go bare, rn50, rn50, bare, rn50, bare):
cd /tmp/repo && REPEATS=3 BUDGET_S=170 timeout 175 bash benchmarks/scripts/ddp_gpu.sh $OUT/a3 sock:4:2x2:RUN=3 \
  sock:4:bare2x2:RUN=3 > $OUT/a3.out 2>&1
