# One H200, second call: the rank's imports without a bytecode cache, cuDNN's benchmark mode on and off at
# the defaults (ABBA), and experiment=fastest cold then warm three times with Triton's cache counted between.
set -u
R=/tmp/res2; mkdir -p $R; exec >> $R/orch.log 2>&1
T0=$(date +%s); log() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_CACHE_DIR=/root/.cache/rn50/torchinductor
IC=$TORCHINDUCTOR_CACHE_DIR
log "start: $(nvidia-smi -L) cpus $(nproc)"
{ env | grep -i '^python'; python3 -c 'import sys,torch,os;d=os.path.dirname(torch.__file__);print("dont_write_bytecode",sys.flags.dont_write_bytecode,"prefix",sys.pycache_prefix,"torch dir",d,"writable",os.access(d,os.W_OK),"pycache",os.path.isdir(d+"/__pycache__"))'
  find "$(python3 -c 'import torch,os;print(os.path.dirname(torch.__file__))')" -name '*.pyc' | wc -l; } > $R/pyc.txt 2>&1
imp='import time;t=time.time();import pytorch_lightning, torchvision;print(f"{time.time()-t:.2f}")'
for i in 1 2; do log "import plain $i: $(python3 -c "$imp")"; done
for i in 1 2; do log "import with a bytecode cache $i: $(env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX=/tmp/pyc python3 -c "$imp")"; done
run() {  # NAME OVERRIDES...
  local n=$1; shift; local s=$(date +%s)
  python3 -m rn50 "$@" hydra.run.dir=/tmp/work/$n > $R/$n.log 2>&1
  log "$n: exit $? in $(( $(date +%s) - s )) s: $*"
  cp /tmp/work/$n/summary.json $R/$n.json 2>/dev/null
  mkdir -p $R/$n; (cd /tmp/work/$n && cp --parents $(find . -name 'rank*.log') $R/$n/ 2>/dev/null)
}
census() { find $IC/triton ~/.triton -name '*.json' 2>/dev/null | sort > $R/triton_$1.txt; log "triton cache after $1: $(wc -l < $R/triton_$1.txt) json files"; }
run on_a bench.repeats=3
run off_a bench.repeats=3 model.cudnn_benchmark=false
run off_b bench.repeats=3 model.cudnn_benchmark=false
run on_b bench.repeats=3
PYTHONDONTWRITEBYTECODE= PYTHONPYCACHEPREFIX=/tmp/pyc run pyc_1 bench.repeats=1
PYTHONDONTWRITEBYTECODE= PYTHONPYCACHEPREFIX=/tmp/pyc run pyc_2 bench.repeats=1
census before
run fastest_cold experiment=fastest bench.repeats=1
census cold
run fastest_warm1 experiment=fastest bench.repeats=1
census warm1
run fastest_warm2 experiment=fastest bench.repeats=3
run fastest_warm_off experiment=fastest bench.repeats=3 model.cudnn_benchmark=false
census off
run fastest_warm3 experiment=fastest bench.repeats=3
log "done"
