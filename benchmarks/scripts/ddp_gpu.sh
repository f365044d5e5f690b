#!/usr/bin/env bash
# rn50's DDP step against the bare DDP loop (torchrun -m rn50.baseline), the same step, in one call.
# Usage: benchmarks/scripts/ddp_gpu.sh OUTDIR CASE...   (from the repository root, rn50's deps installed)
# A CASE is TRANSPORT:GPUS:WHAT[:OVERRIDES], e.g. sock:2:bare, sock:2:rn50, nvl:4:rn50:precision=bf16
#   TRANSPORT nvl: NCCL as it chooses (NVLink, P2P); sock: NCCL on its socket transport over loopback
#             (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo), what a network between hosts costs
#   WHAT bare: torchrun --nproc-per-node GPUS -m rn50.baseline; rn50: python -m rn50 dist=1nGPUSg;
#        sweep: python -m rn50 --multirun dist=1nGPUSg with OVERRIDES swept (a|b sweeps a,b);
#        tr: torchrun --standalone -m rn50 cluster=torchrun; envbare: the bare loop's processes started as rn50's
#        pool starts ranks (no torchrun); NxM: N torchrun "nodes" of M GPUs each (cluster=torchrun), as on N hosts;
#        bareNxM: the bare loop as the same N torchrun "nodes", the NxM case's reference (NCCL builds its rings
#        and trees across nodes otherwise than on one)
#   OVERRIDES: rn50 keys, comma-separated (bare takes them as its flags: precision=bf16 -> --precision bf16,
#              batch_size=512 -> --batch-size 512, compile=true -> --compile);
#              an upper-case NAME=VALUE among them is an environment variable of the case's processes
# REPEATS (default 5) windows of 100 steps after 20 warm-up; PROFILE=1 adds 5 profiled steps after them
# (traces in OUTDIR); THREADS=1 records each case's CPU use by thread 25 s after its start, for 5 s
# (thread_cpu.py, OUTDIR/CASE.threads). BUDGET_S (default 560) bounds the call. A table of every result comes last.
set -uo pipefail
out=${1:?output directory}; mkdir -p "$out"; out=$(cd "$out" && pwd); shift
repo=$(pwd)
export PYTHONPATH=$repo${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
work=$(mktemp -d) && cd "$work"
deadline=$((SECONDS + ${BUDGET_S:-560}))
repeats=${REPEATS:-5}
{
  date -u +%FT%TZ
  nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
  nvidia-smi topo -m
  echo "cpus: $(nproc)"
  python3 -c 'import torch,pytorch_lightning as pl;print("torch",torch.__version__,"cudnn",torch.backends.cudnn.version(),"lightning",pl.__version__,"nccl",".".join(map(str,torch.cuda.nccl.version())))'
} > "$out/env.txt" 2>&1
head -n 3 "$out/env.txt"
# the bare loop's flags from a case's OVERRIDES: batch_size=512 -> --batch-size 512, compile=true -> --compile
bare_flags() {
  for kv in "${keys[@]}"; do
    flag="--$(tr _ - <<< "${kv%%=*}")"
    if [ "${kv#*=}" = true ]; then flags+=("$flag"); else flags+=("$flag" "${kv#*=}"); fi
  done
}
# $nodes torchrun "nodes" of $per GPUs on this host, each seeing its own GPUs, as on several hosts, running
# torchrun's ARGS...; node i's output in OUTDIR/CASE-nodei.log (apart: its stdout in the work folder's
# CASE-nodei.out, where the bare loop's JSON line stays whole). Usage: torchrun_nodes together|apart ARGS...
torchrun_nodes() {
  local mode=$1 port=$((29400 + RANDOM % 1000)) node; shift
  for node in $(seq 0 $((nodes - 1))); do
    (
      if [ "$mode" = apart ]; then exec > "$work/$name-node$node.out" 2> "$out/$name-node$node.log"
      else exec > "$out/$name-node$node.log" 2>&1; fi
      exec env "${envs[@]}" CUDA_VISIBLE_DEVICES="$(seq -s, $((node * per)) $((node * per + per - 1)))" \
        timeout "$left" python3 -m torch.distributed.run --nnodes="$nodes" --nproc-per-node="$per" \
        --rdzv-backend=c10d --rdzv-endpoint=127.0.0.1:$port --rdzv-id="$name" "$@"
    ) &
  done
  wait
}
SOCK=(NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo)

for case in "$@"; do
  IFS=: read -r transport gpus what overrides <<< "$case"
  name="${transport}-${gpus}-${what}${overrides:+-${overrides//[=,.|]/_}}"; name=${name,,}
  IFS=, read -r -a given <<< "${overrides:-}"
  keys=(); caseenv=()
  for kv in "${given[@]}"; do
    if [[ $kv =~ ^[A-Z_][A-Z0-9_]*= ]]; then caseenv+=("$kv"); else keys+=("$kv"); fi
  done
  left=$((deadline - SECONDS - 15))
  if [ "$left" -lt 45 ]; then echo "$name: skipped, out of time"; continue; fi
  envs=("${caseenv[@]}"); [ "$transport" = sock ] && envs+=("${SOCK[@]}")
  t0=$SECONDS
  [ "${THREADS:-0}" = 1 ] && python3 "$repo/benchmarks/scripts/thread_cpu.py" --after 25 --for 5 > "$out/$name.threads" &
  case $what in
    bare)
      flags=(--repeats "$repeats")
      bare_flags
      [ "${PROFILE:-0}" = 1 ] && flags+=(--profile-dir "$out/$name")
      env "${envs[@]}" timeout "$left" python3 -m torch.distributed.run --standalone --nproc-per-node "$gpus" \
        -m rn50.baseline "${flags[@]}" 2> "$out/$name.log" | tail -n 1 > "$out/$name.json"
      ;;
    rn50)
      extra=(); [ "${PROFILE:-0}" = 1 ] && extra=(profiler=pytorch)
      env "${envs[@]}" timeout "$left" python3 -m rn50 "dist=1n${gpus}g" bench.repeats="$repeats" "${keys[@]}" \
        "${extra[@]}" hydra.run.dir="$work/$name" > "$out/$name.log" 2>&1
      cp "$work/$name/summary.json" "$out/$name.json" 2>/dev/null
      [ "${PROFILE:-0}" = 1 ] && mkdir -p "$out/$name" && cp "$work/$name/trace.json.gz" "$out/$name/trace-rank0.json.gz"
      ;;
    sweep)  # one --multirun: its points share warm ranks; OVERRIDES hold the swept keys (a,b as a|b)
      swept=(); for kv in "${keys[@]}"; do swept+=("${kv//|/,}"); done
      dist=("dist=1n${gpus}g"); [[ " ${swept[*]}" == *" dist="* ]] && dist=()  # a sweep over dist says its own
      env "${envs[@]}" timeout "$left" python3 -m rn50 --multirun "${dist[@]}" bench.repeats="$repeats" \
        "${swept[@]}" hydra.sweep.dir="$work/$name" > "$out/$name.log" 2>&1
      for point in "$work/$name"/[0-9]*/; do
        cp "$point/summary.json" "$out/$name-p$(basename "$point").json" 2>/dev/null
      done
      cp "$work/$name/sweep_report.md" "$out/$name.md" 2>/dev/null
      ;;
    tr)  # rn50 as torchrun's processes on this one node (cluster=torchrun)
      env "${envs[@]}" timeout "$left" python3 -m torch.distributed.run --standalone --nproc-per-node "$gpus" \
        -m rn50 cluster=torchrun "dist=1n${gpus}g" bench.repeats="$repeats" "${keys[@]}" \
        hydra.run.dir="$work/$name" > "$out/$name.log" 2>&1
      cp "$work/$name/summary.json" "$out/$name.json" 2>/dev/null
      ;;
    envbare)  # the bare loop's processes started as rn50's pool starts its ranks: no torchrun, its variables only
      port=$((29400 + RANDOM % 1000)); flags=(--repeats "$repeats")
      bare_flags
      for rank in $(seq 0 $((gpus - 1))); do
        env "${envs[@]}" MASTER_ADDR=127.0.0.1 MASTER_PORT=$port WORLD_SIZE="$gpus" RANK="$rank" LOCAL_RANK="$rank" \
          timeout "$left" python3 -m rn50.baseline "${flags[@]}" > "$work/$name-$rank.out" 2> "$out/$name-$rank.log" &
      done
      wait
      tail -n 1 "$work/$name-0.out" > "$out/$name.json"
      ;;
    bare[0-9]x[0-9])  # the bare loop as NODES torchrun "nodes" of PER_NODE GPUs on this host, as NxM runs rn50
      shape=${what#bare}; nodes=${shape%x*}; per=${shape#*x}; flags=(--repeats "$repeats")
      bare_flags
      torchrun_nodes apart -m rn50.baseline "${flags[@]}"
      cat "$work/$name"-node*.out | grep '^{' | tail -n 1 > "$out/$name.json"  # rank 0's line, whichever node had it
      ;;
    [0-9]x[0-9])  # NODESxPER_NODE torchrun "nodes" on this host, each seeing its own GPUs, as on several hosts
      nodes=${what%x*}; per=${what#*x}
      torchrun_nodes together -m rn50 cluster=torchrun dist.nodes="$nodes" dist.gpus_per_node="$per" \
        bench.repeats="$repeats" "${keys[@]}" hydra.run.dir="$work/$name"
      cp "$work/$name/summary.json" "$out/$name.json" 2>/dev/null
      ;;
  esac
  # every rn50 rank's log (a sweep's points in their folders): the compile timers of rank 0, warnings
  logs=$(cd "$work/$name" 2>/dev/null && find . -name 'rank*.log')
  [ -n "$logs" ] && mkdir -p "$out/$name" && (cd "$work/$name" && cp --parents $logs "$out/$name/")
  echo "$name: done in $((SECONDS - t0)) s"
done
python3 "$repo/benchmarks/scripts/ddp_table.py" "$out" | tee "$out/table.md"
