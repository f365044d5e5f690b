"""Starting a run's processes: one per device on this host, under torch's elastic agent.

The agent gives each process the torchrun environment, which Lightning picks up
instead of re-launching the script itself. That keeps Lightning's DDP launcher
out of Hydra multiruns, where it would re-run the whole sweep in every rank.
"""

import importlib.util
import logging
import sys
import uuid
from typing import Sequence
import torch
from omegaconf import DictConfig

from rn50.errors import ConfigError, RunFailed
from rn50 import data, ncu, schema
from rn50.dali import MISSING as MISSING_DALI
from rn50.schema import Accelerator, DataName, dist_name

log = logging.getLogger(__name__)


def resolve_accelerator(cfg: DictConfig) -> Accelerator:
    """gpu or cpu for this host, or a ConfigError saying which dist option would fit."""
    name, per_node = dist_name(cfg), cfg.dist.gpus_per_node
    if cfg.dist.nodes > 1:
        raise ConfigError(
            f"dist={name} needs {cfg.dist.nodes} nodes but cluster={cfg.cluster.name.value} runs on "
            f"this host only; use a dist option with 1 node (1n{per_node}g) here"
        )
    if cfg.dist.accelerator == Accelerator.cpu:
        return Accelerator.cpu
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


def preflight(cfg: DictConfig) -> None:
    """Everything that can be wrong before a process starts; sets the resolved accelerator."""
    schema.validate(cfg)
    cfg.dist.accelerator = resolve_accelerator(cfg)
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
        lines = [line for line in str(message).splitlines() if line.strip()]
        # A DataLoader worker's error arrives as "Caught X in DataLoader worker ...", traceback, "X: ...".
        message = (lines[-1] if "in DataLoader worker" in lines[0] else lines[0]) if lines else ""
        message = message.strip() or f"exit code {failure.exitcode}"
        raise RunFailed(f"rank {rank} failed: {message}", kind=failure_kind(message)) from None
