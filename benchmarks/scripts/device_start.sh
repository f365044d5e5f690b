#!/usr/bin/env bash
# A GPU session's first call, from the repository root of the call's copy of the working tree: install rn50 and its
# dependencies from the carried wheelhouse into the image's python3 (a venv would not see its torch), stash DALI's
# first part where device_session.sh looks for it, copy the tree to /tmp/repo (later calls replace the call's copy)
# and start SCRIPT there in its own session, so that it outlives the call. The calls of
# benchmarks/results/2026-11-28-*/calls/c1.sh did the same, each written out again.
# Usage: bash benchmarks/scripts/device_start.sh SCRIPT [WHEELHOUSE [FIRST_DALI_PART]]
#   SCRIPT: e.g. benchmarks/scripts/four_gpus_gpu.sh; WHEELHOUSE (default .carry/wh): `python -m rn50.wheelhouse`'s;
#   FIRST_DALI_PART (default .carry/d1): benchmarks/scripts/dali_parts.sh's first folder, if carried.
# Set the deadline first: `echo 1450 > /tmp/end_s` (device_session.sh's, in seconds from the script's start).
t0=$SECONDS
script=${1:?the orchestration script, from the repository root}; wh=${2:-.carry/wh}; d1=${3:-.carry/d1}
python3 -m pip install -q --no-index --find-links "$wh" rn50 > /tmp/pip.txt 2>&1 || { tail /tmp/pip.txt; exit 1; }
mkdir -p /tmp/dchunks /tmp/repo /tmp/res && { [ ! -d "$d1" ] || { cp "$d1"/* /tmp/dchunks/ && touch /tmp/dchunks/done-1; }; }
tar cf - --exclude="./$wh" --exclude="./$d1" . | tar xf - -C /tmp/repo
cd /tmp/repo && setsid nohup bash "$script" > /tmp/orch.nohup 2>&1 < /dev/null &
sleep 8; cat /tmp/res/orch.log; nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader; nproc
python3 -c 'import torch;print(torch.__version__)'; echo "device_start: $((SECONDS - t0)) s"
