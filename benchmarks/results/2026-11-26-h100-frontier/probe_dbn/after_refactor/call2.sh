# After the probes' shared layer selection and --dry-run listing (fusion_probe.layers_of, list_layers): each probe
# on one layer, on the GPU, to show that they still run as recorded.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .carry/fe/nvidia_cudnn_frontend-*.whl > /dev/null 2>&1
PYTHONPATH=/tmp/site:. python3 benchmarks/fusion_probe.py --batch 256 --layers layer1.0.conv2 > $OUT/fwd.jsonl 2> $OUT/fwd.err; echo "forward rc=$?"
PYTHONPATH=/tmp/site:. python3 benchmarks/fusion_probe_backward.py --batch 256 --layers layer1.0.conv2 --dbn > $OUT/bwd.jsonl 2> $OUT/bwd.err; echo "backward rc=$?"
python3 benchmarks/triton_conv_probe.py --batch 256 --layers layer1.0.conv2 > $OUT/triton.jsonl 2> $OUT/triton.err; echo "triton rc=$?"
grep -h -E "^layer" $OUT/fwd.err $OUT/bwd.err $OUT/triton.err | cut -c1-330
