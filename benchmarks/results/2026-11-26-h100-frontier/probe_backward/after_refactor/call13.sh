set -u
t0=$SECONDS
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .carry/fe/nvidia_cudnn_frontend-*.whl > $OUT/fe_install.log 2>&1; echo "fe install rc=$? $((SECONDS-t0)) s"
PYTHONPATH=/tmp/site:. timeout 150 python3 benchmarks/fusion_probe.py --batch 256 --layers conv1 layer1.0 layer4.1 > $OUT/fwd_smoke.jsonl 2> $OUT/fwd_smoke.err
echo "forward smoke rc=$? at $((SECONDS-t0)) s"; tail -n 2 $OUT/fwd_smoke.err | cut -c1-250; head -c 600 $OUT/fwd_smoke.jsonl; echo
PYTHONPATH=/tmp/site:. timeout 200 python3 benchmarks/fusion_probe_backward.py --batch 256 > $OUT/bwd_smoke.jsonl 2> $OUT/bwd_smoke.err
echo "backward rc=$? at $((SECONDS-t0)) s"; tail -n 2 $OUT/bwd_smoke.err | cut -c1-250
