#!/usr/bin/env bash
# Does cuDNN 9.24 (nvidia-cudnn-cu13 9.24.0.43, torch 2.14's) build the DgradDreluBNBwdWeight graph on this GPU?
# cuDNN 9.19 (the image's) built none with dbn_weight on sm_90. The 9.24 engine libraries come in parts, one per
# call (.carry/cd924/part.*), gathered in /tmp/cd924 while the machine stays warm; the last call (CHECK=1) unpacks
# them beside a link to the image's CUDA libraries and asks cudnn_dbn.cpp's support() for the four graphs, on two layers.
set -u
cd "$(dirname "$0")/.."
mkdir -p /tmp/cd924 && cp .carry/cd924/part.* /tmp/cd924/ 2>/dev/null; ls /tmp/cd924 | tr '\n' ' '; echo
[ "${CHECK:-0}" = 1 ] || exit 0
t0=$SECONDS
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .carry/fe/nvidia_cudnn_frontend-*.whl > $OUT/fe_install.log 2>&1
python3 -c "import cuda.bindings" 2>/dev/null || python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .carry/fe/cuda_*.whl >> $OUT/fe_install.log 2>&1
site=/tmp/site924; lib=$site/nvidia/cudnn/lib; mkdir -p $lib
cat /tmp/cd924/part.* | python3 -c "import sys, tarfile; tarfile.open(fileobj=sys.stdin.buffer, mode='r|xz').extractall('$lib')"
image=$(python3 -c "import nvidia.cu13, os; print(list(nvidia.cu13.__path__)[0])")
ln -sfn "$image" $site/nvidia/cu13   # the libraries' RUNPATH looks for CUDA's beside them
ls -la $lib | tee $OUT/libs.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/env.txt
for cudnn in image 9.24; do
  [ $cudnn = 9.24 ] && export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  PYTHONPATH=/tmp/site:benchmarks:. timeout 300 python3 - <<'PY' 2>&1 | tee -a $OUT/support_$cudnn.txt
import json, torch, cudnn
from fusion_probe_backward import DBN_VARIANTS, dbn_extension
ext = dbn_extension(cudnn)
print(json.dumps({"torch": torch.__version__, "torch_cudnn": torch.backends.cudnn.version(), "ext_cudnn": ext.cudnn_version(),
                  "gpu": torch.cuda.get_device_name(), "capability": torch.cuda.get_device_capability()}))
layers = {"layer1.0.conv2": (256, 64, 56, 56, 64, 3, 3, 56, 56, 1, 1), "layer3.0.conv3": (256, 256, 14, 14, 1024, 1, 1, 14, 14, 1, 0)}
for name, dims in layers.items():
    for v, variant in enumerate(DBN_VARIANTS):
        print(json.dumps({"layer": name, "graph": variant, "support": ext.support(v, *dims)[-700:] or "ok"}))
PY
done
echo "done at $((SECONDS-t0)) s"
