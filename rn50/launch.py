"""Where a run's processes come from, and the checks made before any of them starts.

cluster=local: one process per device on this host, under torch's elastic agent. The
agent gives each process the torchrun environment, which Lightning picks up instead
of re-launching the script itself. That keeps Lightning's DDP launcher out of Hydra
multiruns, where it would re-run the whole sweep in every rank.

cluster=torchrun and cluster=slurm: torchrun or SLURM started this process as one
rank of the run, so it runs the worker itself (`run_here`).
"""

import importlib.util
import logging
import os
import shlex
import sys
import uuid
from typing import Sequence
import torch
from omegaconf import DictConfig

from rn50.errors import ConfigError, RunFailed
from rn50 import data, ncu, schema
from rn50.dali import MISSING as MISSING_DALI
from rn50.schema import Accelerator, ClusterName, DataName, dist_name

log = logging.getLogger(__name__)


# The variables that say which rank a process is and how many there are.
RANK_ENV = {ClusterName.torchrun: ("RANK", "WORLD_SIZE"), ClusterName.slurm: ("SLURM_PROCID", "SLURM_NTASKS")}


def resolve_accelerator(cfg: DictConfig, here: bool = True) -> Accelerator:
    """gpu or cpu, or a ConfigError saying which dist option would fit.

    here=False is for processes that will run on other hosts (a SLURM submission, printed
    torchrun commands): their GPUs cannot be counted from this one, so auto means gpu.
    """
    name, per_node = dist_name(cfg), cfg.dist.gpus_per_node
    if cfg.dist.nodes > 1 and cfg.cluster.name == ClusterName.local:
        raise ConfigError(
            f"dist={name} needs {cfg.dist.nodes} nodes but cluster=local runs on this host only; "
            f"use cluster=slurm or cluster=torchrun, or a dist option with 1 node (1n{per_node}g)"
        )
    if cfg.dist.accelerator == Accelerator.cpu:
        return Accelerator.cpu
    if not here:
        return Accelerator.gpu
    gpus = torch.cuda.device_count()
    if gpus == 0 and cfg.dist.accelerator == Accelerator.auto and per_node == 1:
        log.warning("no GPU on this host: dist.accelerator=auto falls back to the CPU")
        return Accelerator.cpu
    if per_node > gpus:
        hint = "dist.accelerator=cpu for CPU processes" if gpus == 0 else f"dist=1n{gpus}g or fewer"
        raise ConfigError(
            f"dist={name} needs {per_node} GPUs but this host has {gpus}; use {hint}"
        )
    return Accelerator.gpu


OOM_SIGNS = ("outofmemoryerror", "out of memory", "can't allocate memory", "cannot allocate memory")


def preflight(cfg: DictConfig, here: bool = True) -> None:
    """Everything that can be wrong before a process starts; sets the resolved accelerator."""
    schema.validate(cfg)
    cfg.dist.accelerator = resolve_accelerator(cfg, here)
    if cfg.data.name == DataName.dali and importlib.util.find_spec("nvidia.dali") is None:
        raise ConfigError(MISSING_DALI)
    if cfg.data.name != DataName.synthetic:
        world = cfg.dist.nodes * cfg.dist.gpus_per_node
        data.count_train_images(cfg.data.root, cfg.data.batch_size * world)
    ncu.preflight(cfg)


def failure_kind(message: str) -> str:
    """oom for CUDA's and the CPU allocator's out-of-memory errors, else error."""
    text = message.lower()
    return "oom" if any(sign in text for sign in OOM_SIGNS) else "error"


def run_local(nprocs: int, worker_args: list, prefix: Sequence[str] = ()) -> None:
    """Run `[PREFIX] python -m rn50.worker ARGS` in nprocs processes; RunFailed names the first failure.

    A prefix is a command that starts the worker itself, such as a profiler's.
    """
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    config = LaunchConfig(
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=nprocs,
        run_id=str(uuid.uuid4()),
        rdzv_backend="c10d",
        rdzv_endpoint="localhost:0",
        max_restarts=0,
        monitor_interval=0.5,
    )
    try:
        entrypoint, *args = [*prefix, sys.executable, "-m", "rn50.worker", *worker_args]
        elastic_launch(config, entrypoint)(*args)
    except ChildFailedError as exc:
        rank, failure = exc.get_first_failure()
        message = failure.message
        if isinstance(message, dict):  # the error file written by the worker's @record
            message = message.get("message", "")
        message = error_line(str(message)) or f"exit code {failure.exitcode}"
        raise RunFailed(f"rank {rank} failed: {message}", kind=failure_kind(message)) from None


def error_line(text: str) -> str:
    """The line of an error message that says what went wrong; empty for an empty message."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return ""
    # A DataLoader worker's error arrives as "Caught X in DataLoader worker ...", traceback, "X: ...".
    return lines[-1] if "in DataLoader worker" in lines[0] else lines[0]


def process_rank(cfg: DictConfig) -> int:
    """This process's global rank: 0 for cluster=local, whose ranks are its children; else
    the rank torchrun or SLURM gave it, once the number of processes matches dist."""
    if cfg.cluster.name == ClusterName.local:
        return 0
    rank_key, world_key = RANK_ENV[cfg.cluster.name]
    starter = "torchrun" if cfg.cluster.name == ClusterName.torchrun else "SLURM"
    if rank_key not in os.environ:
        how = ("run the commands that `python -m rn50 cluster=torchrun dry_run=true` prints on each node"
               if starter == "torchrun" else "submit with `python -m rn50 cluster=slurm` from a host with sbatch")
        raise ConfigError(f"cluster={cfg.cluster.name.value} but {starter} did not start this process "
                          f"({rank_key} is not set); {how}")
    if starter == "torchrun" and os.environ.get("TORCHELASTIC_RUN_ID", "none") == "none":
        # It names the output directory all ranks share (conf/cluster/torchrun.yaml).
        raise ConfigError("cluster=torchrun needs torchrun's --rdzv-id, the same on every node; "
                          "the commands that dry_run=true prints carry one")
    world, wanted = int(os.environ[world_key]), cfg.dist.nodes * cfg.dist.gpus_per_node
    if world != wanted:
        raise ConfigError(
            f"dist={dist_name(cfg)} needs {wanted} processes but {starter} started {world}; start "
            f"{cfg.dist.nodes} node(s) of {cfg.dist.gpus_per_node} process(es), or set dist to match"
        )
    return int(os.environ[rank_key])


def run_here(cfg: DictConfig, run_id, out) -> None:
    """Run this process's rank of the benchmark; rank 0 logs into run_id. Failures become RunFailed."""
    from rn50 import worker

    try:
        worker.run(cfg, run_id, out)
    except Exception as exc:
        message = error_line(str(exc)) or type(exc).__name__
        # submitit raises UncompletedJobError in rank 0 when SLURM times the job out or preempts it.
        kind = "slurm" if type(exc).__name__ == "UncompletedJobError" else failure_kind(message)
        raise RunFailed(f"rank {os.environ.get(RANK_ENV[cfg.cluster.name][0], 0)} failed: {message}",
                        kind=kind) from exc


def plan(cfg: DictConfig, overrides) -> str:
    """What a dry run prints for cluster=local or torchrun: the processes, or each node's command."""
    name, nodes, per_node = dist_name(cfg), cfg.dist.nodes, cfg.dist.gpus_per_node
    device = cfg.dist.accelerator.value
    if cfg.cluster.name == ClusterName.local:
        return f"dist={name}: {per_node} {device} process(es) on this host, started by torch's elastic agent"
    args = [o for o in overrides if not o.startswith(("dry_run=", "cluster="))]
    command = shlex.join([
        "torchrun", f"--nnodes={nodes}", f"--nproc-per-node={per_node}", "--rdzv-backend=c10d",
        f"--rdzv-endpoint={cfg.cluster.rdzv_endpoint}", f"--rdzv-id=rn50-{uuid.uuid4().hex[:8]}",
        "-m", "rn50", "cluster=torchrun", *args,
    ])
    lines = [f"dist={name}: {nodes} node(s) x {per_node} {device} process(es); run on each node, "
             f"node 0 at {cfg.cluster.rdzv_endpoint.rsplit(':', 1)[0]} (the rendezvous numbers the nodes):"]
    lines += [f"node {i}: {command}" for i in range(nodes)]
    return "\n".join(lines)
