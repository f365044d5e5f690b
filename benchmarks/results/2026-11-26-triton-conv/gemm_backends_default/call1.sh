# benchmarks/triton_conv_probe.py on one GPU: layers given as $LAYERS (the first call: the stem, layer1, layer2).
set -u
t0=$SECONDS
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee $OUT/env.txt
python3 -c "import torch, torchvision, triton; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version(), 'tv', torchvision.__version__, 'triton', triton.__version__)" | tee -a $OUT/env.txt
timeout 540 python3 benchmarks/triton_conv_probe.py --batch 256 --layers $LAYERS > $OUT/probe_256_$TAG.jsonl 2> $OUT/probe_256_$TAG.err
echo "probe rc=$? at $((SECONDS-t0)) s"
grep -v "^\s*$" $OUT/probe_256_$TAG.err | grep -E "^(conv1|layer)|summary|torch" | cut -c1-260
