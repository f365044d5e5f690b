set -u
t0=$SECONDS
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .carry/fe/nvidia_cudnn_frontend-*.whl > $OUT/fe_install.log 2>&1; echo "fe install rc=$? $((SECONDS-t0)) s"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/env.txt
python3 -c "import torch, torchvision; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version(), 'tv', torchvision.__version__)" | tee -a $OUT/env.txt
PYTHONPATH=/tmp/site:. timeout 200 python3 benchmarks/fusion_probe.py --batch 512 > $OUT/probe_fwd_512.jsonl 2> $OUT/probe_fwd_512.err
echo "forward 512 rc=$? at $((SECONDS-t0)) s"; tail -n 1 $OUT/probe_fwd_512.err | cut -c1-300
for b in 256 512; do
  PYTHONPATH=/tmp/site:. timeout 200 python3 benchmarks/fusion_probe_backward.py --batch $b > $OUT/probe_bwd_$b.jsonl 2> $OUT/probe_bwd_$b.err
  echo "backward $b rc=$? at $((SECONDS-t0)) s"; tail -n 1 $OUT/probe_bwd_$b.err | cut -c1-300
done
