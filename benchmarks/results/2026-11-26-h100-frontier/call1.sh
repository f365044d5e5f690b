set -u
t0=$SECONDS
python3 -m pip install -q --no-index --find-links .carry/wh rn50 > $OUT/install.log 2>&1; echo "install rc=$? $((SECONDS-t0)) s"
W="python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site"
$W .carry/fe/nvidia_cudnn_frontend-*.whl >> $OUT/install.log 2>&1
python3 -c "import cuda.bindings" 2>/dev/null || $W .carry/fe/cuda_*.whl >> $OUT/install.log 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c 'import torch,torchvision,pytorch_lightning as pl;print("torch",torch.__version__,"cudnn",torch.backends.cudnn.version(),"tv",torchvision.__version__,"pl",pl.__version__)'
PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1 timeout 260 python3 benchmarks/fusion_probe.py --batch 256 > $OUT/probe256.jsonl 2> $OUT/probe256.err
echo "probe rc=$? at $((SECONDS-t0)) s"; tail -n 5 $OUT/probe256.err
left=$((560 - SECONDS)); echo "left $left"
mkdir -p /tmp/w && cd /tmp/w
timeout $left python3 -m rn50 experiment=mlperf hydra.run.dir=/tmp/w/mlperf_lars > $OUT/mlperf_lars.log 2>&1; echo "mlperf lars rc=$? at $((SECONDS-t0)) s"
cp /tmp/w/mlperf_lars/summary.json $OUT/mlperf_lars.json 2>/dev/null
tail -n 4 $OUT/mlperf_lars.log
