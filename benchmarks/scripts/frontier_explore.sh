#!/usr/bin/env bash
# Issue-13 exploration on one GPU: the bare PyTorch loop (rn50.baseline) under the knobs that
# might move ResNet-50 past 8,000 images/sec, each in a fresh process, one JSON line per setting.
# Usage: benchmarks/scripts/frontier_explore.sh OUTDIR [SECONDS_PER_SETTING]   (from the repository root)
set -uo pipefail
out=${1:?output directory}; limit=${2:-150}
export PYTHONPATH=$(pwd)${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv | tee "$out/gpu.csv"
python3 -c 'import torch,torchvision;print("torch",torch.__version__,"torchvision",torchvision.__version__,"cudnn",torch.backends.cudnn.version())' | tee "$out/versions.txt"
run() {  # name, then rn50.baseline arguments
  local name=$1; shift
  local t0=$SECONDS
  if timeout "$limit" python3 -m rn50.baseline "$@" > "$out/$name.json" 2> "$out/$name.err"; then
    python3 -c "import json,sys;r=json.loads(open(sys.argv[1]).read().splitlines()[-1]);print(f'{sys.argv[2]:<28} {r[\"images_per_sec\"]:9.1f} img/s  ({sys.argv[3]} s)')" "$out/$name.json" "$name" $((SECONDS - t0))
  else
    echo "$name failed ($((SECONDS - t0)) s): $(tail -1 "$out/$name.err")"
  fi
}
for setting in ${SETTINGS:-eager_amp_256 eager_amp_512_graph compile_amp_512 compile_amp_512_1x1mm compile_bf16_512_graph compile_amp_512_ro compile_amp_384}; do
  case $setting in
    eager_amp_256)          run $setting --precision amp --batch-size 256 ;;
    eager_amp_512_graph)    run $setting --precision amp --batch-size 512 --cuda-graph ;;
    compile_amp_512)        run $setting --precision amp --batch-size 512 --compile ;;
    compile_amp_512_1x1mm)  run $setting --precision amp --batch-size 512 --compile --conv-1x1-as-mm ;;
    compile_bf16_512_graph) run $setting --precision bf16 --batch-size 512 --compile --cuda-graph ;;
    compile_amp_512_ro)     run $setting --precision amp --batch-size 512 --compile --compile-mode reduce-overhead ;;
    compile_amp_384)        run $setting --precision amp --batch-size 384 --compile ;;
    compile_amp_400)        run $setting --precision amp --batch-size 400 --compile ;;
    compile_amp_256)        run $setting --precision amp --batch-size 256 --compile ;;
    compile_amp_512_mat)    run $setting --precision amp --batch-size 512 --compile --compile-mode max-autotune-no-cudagraphs ;;
    compile_amp_512_ma)     run $setting --precision amp --batch-size 512 --compile --compile-mode max-autotune ;;
    compile_amp_448_ro)     run $setting --precision amp --batch-size 448 --compile --compile-mode reduce-overhead ;;
    compile_amp_576_ro)     run $setting --precision amp --batch-size 576 --compile --compile-mode reduce-overhead ;;
    compile_amp_640_ro)     run $setting --precision amp --batch-size 640 --compile --compile-mode reduce-overhead ;;
    # inductor re-tunes the block sizes of its own (batch-norm and elementwise) Triton kernels
    compile_amp_512_ro_cdt) TORCHINDUCTOR_COORDINATE_DESCENT_TUNING=1 \
                            run $setting --precision amp --batch-size 512 --compile --compile-mode reduce-overhead ;;
    # inductor benchmarks several block-size configs for each pointwise and reduction kernel
    compile_amp_512_ro_pw)  run $setting --precision amp --batch-size 512 --compile --compile-mode reduce-overhead \
                                --autotune-pointwise ;;
    compile_amp_512_ro_pw_cdt) run $setting --precision amp --batch-size 512 --compile --compile-mode reduce-overhead \
                                --autotune-pointwise --autotune-coordinate-descent ;;
  esac
done
