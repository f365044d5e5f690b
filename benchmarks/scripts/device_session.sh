# The prologue of a GPU session's orchestration script, sourced from the repository root on the device
# machine: `. benchmarks/scripts/device_session.sh` (the scripts under benchmarks/results/*/calls/ that
# predate it copy it). It logs to $R/orch.log, installs DALI from its parts as later calls bring them
# (/tmp/dchunks/dsite.tar.xz.part-*, done-1 .. done-$DALI_PARTS: rn50.wheelhouse --split-mb), writes
# the fake ImageNet tree $TREE, and defines:
#   one OUTDIR NAME TIMEOUT OVERRIDES...  one `python -m rn50` run; its summary, epochs and rank logs kept
#   phase NAME MIN_SECONDS OUTDIR CASE... benchmarks/scripts/ddp_gpu.sh with the time left
#   ready                                 waits for DALI and the tree (at most 400 s from the start)
# The session's deadline is seconds from its start, in /tmp/end_s (default 1300): nothing starts past it.
# GATE: a file the unpack and the tree wait for (set it to let a cold compile have the CPUs first); unset: at once.
set -u
R=${R:-/tmp/res}; mkdir -p "$R"
exec >> "$R/orch.log" 2>&1
T0=$(date +%s)
now() { echo $(( $(date +%s) - T0 )); }
log() { echo "[$(now) s] $*"; }
left() { local end=1300; [ -s /tmp/end_s ] && end=$(cat /tmp/end_s); echo $(( end - $(now) )); }
DDP=benchmarks/scripts/ddp_gpu.sh
TREE=${TREE:-/tmp/imagenet}
DALI_PARTS=${DALI_PARTS:-4}
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_CACHE_DIR=/root/.cache/rn50/torchinductor
GATE=${GATE:-}
log "start: $(nvidia-smi -L | tr '\n' ';') cpus $(nproc)"
gate() { [ -z "$GATE" ] || while [ ! -e "$GATE" ]; do sleep 3; done; }

( gate; for i in $(seq 1 "$DALI_PARTS"); do while [ ! -e "/tmp/dchunks/done-$i" ]; do sleep 3; done; done
  site=$(python3 -c 'import os,torch;print(os.path.dirname(os.path.dirname(torch.__file__)))')
  cat /tmp/dchunks/dsite.tar.xz.part-* | xz -dc -T0 | tar xf - -C "$site" \
    && python3 -c 'import nvidia.dali as d, nvidia.dali.fn; print("dali", d.__version__)' && touch /tmp/dali.ok
  log "dali: $( [ -e /tmp/dali.ok ] && echo installed || echo FAILED)" ) &
( gate; nice python3 -m rn50.fake_imagenet "$TREE" --classes 100 --train-per-class 100 --val-per-class 1 2>&1 | tail -n 1 \
    > "$R/fake_imagenet.txt"; touch /tmp/tree.ok; log "jpegs: $(cat "$R/fake_imagenet.txt")" ) &

one() {
  local o=$1 n=$2 t=$3; shift 3; mkdir -p "$o/$n"; local s; s=$(now)
  [ "$(left)" -gt 60 ] || { log "$n: skipped, $(left) s left"; return; }
  timeout $(( t < $(left) - 10 ? t : $(left) - 10 )) python3 -m rn50 "$@" hydra.run.dir="/tmp/work/$n" > "$o/$n.log" 2>&1
  log "$n: exit $? in $(( $(now) - s )) s: python -m rn50 $*"
  cp "/tmp/work/$n/summary.json" "$o/$n.json" 2>/dev/null; cp "/tmp/work/$n/epochs.jsonl" "$o/$n.epochs.jsonl" 2>/dev/null
  cp "/tmp/work/$n/trace.json.gz" "$o/${n}_trace.json.gz" 2>/dev/null
  (cd "/tmp/work/$n" 2>/dev/null && cp --parents $(find . -name 'rank*.log') "$o/$n/" 2>/dev/null)
}

phase() {
  local n=$1 need=$2 o=$3; shift 3
  if [ "$(left)" -lt "$need" ]; then log "$n: skipped, $(left) s left"; return; fi
  log "$n: $*"
  BUDGET_S=$(left) bash "$DDP" "$o" "$@" > "$o.out" 2>&1; log "$n: done"; grep "done in\|skipped" "$o.out"
}

ready() {
  while [ ! -e /tmp/dali.ok ] || [ ! -e /tmp/tree.ok ]; do sleep 2; [ "$(now)" -gt 400 ] && break; done
  log "dali $( [ -e /tmp/dali.ok ] && echo ok) tree $( [ -e /tmp/tree.ok ] && echo ok)"
}
