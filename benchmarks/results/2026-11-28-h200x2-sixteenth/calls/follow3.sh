cd /tmp/repo; R=/tmp/res; exec >> $R/orch.log 2>&1
while [ ! -e $R/FOLLOW2_DONE ]; do sleep 2; done
D=(dist=1n2g bench.repeats=3 data=dali data.root=/tmp/imagenet)
H=(data.dali.hw_decoder_load=0 data.dali.num_threads=12 data.dali.cpu_decode_share=0.25)
run1() { n=$1; shift; s=$SECONDS; mkdir -p $R/g/$n; timeout 150 python3 -m rn50 "$@" hydra.run.dir=/tmp/work/$n > $R/g/$n.log 2>&1
  echo "[follow3] $n: exit $? in $((SECONDS-s)) s: python -m rn50 $*"; cp /tmp/work/$n/summary.json $R/g/$n.json; }
run1 dist2_dali_hybrid_2 "${D[@]}" "${H[@]}"
run1 dist2_dali_3 "${D[@]}"
run1 dist2_dali_hybrid_3 "${D[@]}" "${H[@]}"
run1 dist2_synthetic_3 dist=1n2g bench.repeats=3
echo "[follow3] done"; touch $R/FOLLOW3_DONE
