# fusion_probe_backward.py with C (--dbn: cuDNN's dbn_weight through benchmarks/cudnn_dbn.cpp), batch $BATCH.
set -u
t0=$SECONDS
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .carry/fe/nvidia_cudnn_frontend-*.whl > $OUT/fe_install.log 2>&1; echo "fe install rc=$? $((SECONDS-t0)) s"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/env.txt
python3 -c "import torch; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())" | tee -a $OUT/env.txt
g++ --version | head -1 | tee -a $OUT/env.txt
PYTHONPATH=/tmp/site:. timeout 540 python3 benchmarks/fusion_probe_backward.py --batch $BATCH --dbn ${LAYERS:+--layers $LAYERS} > $OUT/probe_dbn_$BATCH.jsonl 2> $OUT/probe_dbn_$BATCH.err
echo "probe rc=$? at $((SECONDS-t0)) s"
grep -E "^layer|^backward|^C |^\{|Error|error" $OUT/probe_dbn_$BATCH.err | cut -c1-400 | tail -n 30
