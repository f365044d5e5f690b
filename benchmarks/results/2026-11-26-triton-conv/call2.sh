# benchmarks/triton_conv_probe.py with the GEMM backends limited to Triton too (1x1 convolutions become matmuls),
# layers $LAYERS at batch $BATCH (256 unless given); then, if $DBN is set, the dbn_weight probe on one layer (fusion_probe_backward.py --dbn).
set -u
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee $OUT/env.txt
python3 -c "import torch, torchvision, triton; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version(), 'tv', torchvision.__version__, 'triton', triton.__version__)" | tee -a $OUT/env.txt
timeout 420 python3 benchmarks/triton_conv_probe.py --batch ${BATCH:-256} --layers $LAYERS > $OUT/probe_${BATCH:-256}_$TAG.jsonl 2> $OUT/probe_${BATCH:-256}_$TAG.err
echo "triton probe rc=$? at $((SECONDS-t0)) s"
grep -E "^(conv1|layer)|summary" $OUT/probe_${BATCH:-256}_$TAG.err | cut -c1-300
if [ -n "${DBN:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .carry/fe/nvidia_cudnn_frontend-*.whl > /dev/null 2>&1
  PYTHONPATH=/tmp/site:. timeout 150 python3 benchmarks/fusion_probe_backward.py --batch 256 --dbn --layers $DBN > $OUT/probe_dbn_256.jsonl 2> $OUT/probe_dbn_256.err
  echo "dbn probe rc=$? at $((SECONDS-t0)) s"
  grep -E "^layer" $OUT/probe_dbn_256.err | cut -c1-200
fi
