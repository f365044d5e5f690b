#!/usr/bin/env bash
# DALI for a GPU machine that gets files only as a call's carried paths (64 MiB a call, the working tree
# included): DALI's wheel and the ones it needs, unpacked, pruned and compressed into as few parts as
# the calls can carry. 305 MB of wheels (`python -m rn50.wheelhouse --extras dali-cuda130`) become one
# 147 MB `xz -9e` tarball, four calls' worth, where the wheels themselves took six.
#   Left out: nvcomp, nvjpeg2k and nvtiff (DALI and nvImageCodec load them only for their formats), the
#   extension modules of other Pythons, DALI's C++ headers, libcst's tests.
# Usage, from the repository root, with rn50's venv active:
#   benchmarks/scripts/dali_parts.sh OUTDIR [FIRST_MB] [REST_MB] [PYTHON]
# OUTDIR gets d1/, d2/, ...: one folder to carry per call. FIRST_MB (default 20.9) is the first part, which
# travels beside the rn50 wheelhouse (.carry/wh, 37 MB); REST_MB (default 57.6) each later one. PYTHON is
# the target's (default 3.12). On the target, once every part is under /tmp/dchunks (each call copies its
# folder there), install into the Python that has torch:
#   site=$(python3 -c 'import os,torch;print(os.path.dirname(os.path.dirname(torch.__file__)))')
#   cat /tmp/dchunks/dsite.tar.xz.part-* | xz -dc -T0 | tar xf - -C "$site"
# (benchmarks/results/2026-11-27-ninth-h200x4/calls/ has the four calls that did this.)
set -euo pipefail
out=${1:?output directory}; first=${2:-20.9}; rest=${3:-57.6}; py=${4:-3.12}
tag=cpython-${py/./}
work=$(mktemp -d)
python -m rn50.wheelhouse "$work/wh" --python "$py" --platform manylinux_2_28_x86_64 --extras dali-cuda130 \
  --have docs/data/2026-11-23-offline-install-h200/device_pip_list.txt >/dev/null
mkdir "$work/site"
for name in nvidia_dali nvidia_nvimgcodec nvidia_nvjpeg- astunparse gast libcst makefun optree nvtx; do
  for whl in "$work/wh/$name"*.whl; do unzip -q -o "$whl" -d "$work/site"; done
done
find "$work/site" -name "*.cpython-3*" ! -name "*$tag*" -delete
rm -rf "$work/site/nvidia/dali/include"
find "$work/site/libcst" -name tests -type d -prune -exec rm -rf {} +
tar cf - -C "$work/site" . | xz -9e -T0 > "$work/dsite.tar.xz"
python - "$work/dsite.tar.xz" "$out" "$first" "$rest" <<'PY'
import sys
from pathlib import Path

src, out, first, rest = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
data, at, n = src.read_bytes(), 0, 1
while at < len(data):
    size = int((first if n == 1 else rest) * 1e6)
    part = out / f"d{n}"
    part.mkdir(parents=True, exist_ok=True)
    (part / f"dsite.tar.xz.part-{n}").write_bytes(data[at:at + size])
    print(f"{part}: {len(data[at:at + size]) / 1e6:.1f} MB")
    at, n = at + size, n + 1
PY
rm -rf "$work"
