# One H200: where a start's seconds go, at the defaults and at experiment=fastest (cold, then warm twice,
# once under py-spy). Runs from /tmp/repo in its own session; results in /tmp/res.
set -u
R=/tmp/res; mkdir -p $R; exec >> $R/orch.log 2>&1
T0=$(date +%s); log() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_CACHE_DIR=/root/.cache/rn50/torchinductor
C=benchmarks/results/2026-11-28-h200-twentysecond/calls
log "start: $(nvidia-smi -L) cpus $(nproc) torch $(python3 -c 'import torch;print(torch.__version__)')"
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > $R/gpu.txt
run() {  # NAME SPY(0|1) OVERRIDES...
  local n=$1 spy=$2; shift 2; local s=$(date +%s) pre=()
  [ "$spy" = 1 ] && pre=(py-spy record -o $R/$n.speedscope.json --format speedscope -r 50 --subprocesses --idle --)
  "${pre[@]}" python3 -m rn50 "$@" hydra.run.dir=/tmp/work/$n > $R/$n.log 2>&1
  log "$n: exit $? in $(( $(date +%s) - s )) s: $*"
  cp /tmp/work/$n/summary.json $R/$n.json 2>/dev/null
  mkdir -p $R/$n; (cd /tmp/work/$n && cp --parents $(find . -name 'rank*.log') $R/$n/ 2>/dev/null)
}
python3 $C/first_step.py on > $R/cudnn_on.txt 2>&1; log "cudnn on: $(cat $R/cudnn_on.txt | tail -1)"
python3 $C/first_step.py off > $R/cudnn_off.txt 2>&1; log "cudnn off: $(cat $R/cudnn_off.txt | tail -1)"
run defaults_spy 1 bench.repeats=1
run defaults 0 bench.repeats=1
run fastest_cold 0 experiment=fastest bench.repeats=1
run fastest_warm 0 experiment=fastest bench.repeats=1
run fastest_warm_spy 1 experiment=fastest bench.repeats=1
log "done"
