"""Where a run's processes come from, and the checks made before any of them starts.

cluster=local: the ranks are processes on this host that rn50/launcher/pool.py keeps warm between
runs of one world size; Lightning sees them as started from outside, so its own DDP
launcher (which re-runs a whole Hydra multirun in every rank) never runs.
cluster=torchrun and cluster=slurm: torchrun or SLURM started this process as one rank
of the run, so it runs its rank here (`run_rank_here`).

Nothing here imports torch: the GPU count comes from NVML.
"""

import contextlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional

from hydra import compose
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig

from rn50 import console
from rn50.config import reads
from rn50.config.compilation import check_cuda_graphs, cuda_graph_keys
from rn50.config.reads import decided, dist_name, nodes_gpus, world_size
from rn50.config.schema import Accelerator, Device
from rn50.errors import ConfigError
from rn50.measure.settings import lasting_imports
from rn50.launcher import pool
from rn50.measure import bytecode, nvml
from rn50.options import checks, pipelines
from rn50.options.components import Options
from rn50.point import validate

log = logging.getLogger(__name__)


def resolve_accelerator(cfg: DictConfig, cluster, here: bool = True, say: bool = True) -> Accelerator:
    """gpu or cpu, or a ConfigError saying which dist option would fit.

    here=False is for processes that will run on other hosts (a SLURM submission, printed
    torchrun commands): their GPUs cannot be counted from this one, so auto means gpu.
    say=False leaves the CPU fallback's warning to the run itself (a sweep's first ranks).
    cluster: the run's cluster option (rn50/options/clusters.py), which says whether it starts ranks elsewhere.
    """
    name, per_node = dist_name(cfg), cfg.dist.gpus_per_node
    if cfg.dist.nodes > 1 and cluster.rank_env is None:
        raise ConfigError(
            f"dist={name} needs {cfg.dist.nodes} nodes but cluster=local runs on this host only; "
            f"use cluster=slurm or cluster=torchrun, or a dist option with 1 node ({nodes_gpus(1, per_node)})"
        )
    if cfg.dist.accelerator == Accelerator.cpu:
        return Accelerator.cpu
    if not here:
        return Accelerator.gpu
    gpus = nvml.visible_gpu_count()
    if gpus == 0 and falls_back(cfg):
        if not say:
            return Accelerator.cpu
        hint = "" if cfg.device == Device.cpu else "; device=cpu sizes the run for it (these settings take hours there)"
        log.warning("no GPU on this host: dist.accelerator=auto falls back to the CPU" + hint)
        return Accelerator.cpu
    if per_node > gpus:
        hint = "dist.accelerator=cpu for CPU processes" if gpus == 0 else f"dist={nodes_gpus(1, gpus)} or fewer"
        raise ConfigError(
            f"dist={name} needs {per_node} GPUs but this host has {gpus}; use {hint}"
        )
    return Accelerator.gpu


def falls_back(cfg: DictConfig) -> bool:
    """Whether the run goes to the CPU on a host without a GPU, rather than failing: one process a
    host, dist.accelerator=auto."""
    return cfg.dist.accelerator == Accelerator.auto and cfg.dist.gpus_per_node == 1


def for_this_host(cfg: DictConfig, cluster) -> DictConfig:
    """The run as it goes on this host: with device=auto on a host without a GPU, composed again as
    device=cpu, the CPU profile (conf/device/cpu.yaml), with one line that says what it chose and
    why; otherwise cfg as it is. Composing again, rather than changing keys here, keeps Hydra's
    order: the command line's keys (and a preset's) win over the profile's, as with device=cpu typed.

    Only where rn50 starts the ranks on this host (cluster=local): a SLURM submission runs on other
    hosts, and torchrun's and SLURM's ranks each compose the run they are given. cluster: the run's
    cluster option; the CPU profile leaves cfg.cluster as it is, so it stays the run's."""
    if (cfg.device != Device.auto or not falls_back(cfg) or cfg.dist.nodes > 1 or cluster.rank_env
            or nvml.visible_gpu_count() > 0):
        return cfg
    hydra_cfg = HydraConfig.get()
    given = [o.input_line for o in OverridesParser.create().parse_overrides(list(hydra_cfg.overrides.task))
             if o.get_key_element() != "device"]  # device=auto, said out loud
    profiled = compose(hydra_cfg.job.config_name, overrides=[*given, "device=cpu"])
    log.warning("no GPU on this host: the CPU profile (device=cpu) runs %s at %d px in %s, batch %s, %d warm-up and "
                "%d measured steps, as the GPU default would take hours here; a CPU figure, recorded as one. "
                "device=gpu runs the full default anyway", profiled.model.arch.value, profiled.data.image_size,
                profiled.precision.name, profiled.data.batch_size, profiled.bench.warmup_steps, profiled.bench.steps)
    return profiled


@dataclass(frozen=True)
class Preflight:
    """What the checks before any process starts decided, handed on as one value: the launcher records
    and starts `cfg`, and its ranks run it."""

    cfg: DictConfig
    """The run's config with the decisions in it, read-only (reads.decided); the composed one is left as it was."""
    options: Options
    """The run's options, built once."""


def preflight(cfg: DictConfig, here: bool = True, options: Optional[Options] = None, cluster=None) -> Preflight:
    """Everything that can be wrong before a process starts, and what this host decides for the run:
    dist.accelerator (auto becomes the device found here), model.num_classes (null becomes the data's
    classes), and, for a run that captures CUDA graphs, model.cuda_graphs with model.compile_mode
    (compilation.cuda_graph_keys). options: built here once unless handed in; cluster: the run's cluster
    option, where the caller built it."""
    validate.check_declared(cfg)  # a key added with + that the schema does not know
    options = options or Options.of(cfg, cluster=cluster)
    validate.validate(cfg, options)
    accelerator = resolve_accelerator(cfg, options.cluster, here)
    run = decided(cfg, {"dist.accelerator": accelerator})
    if accelerator != cfg.dist.accelerator:  # auto became a device: CUDA graphs need it to be a GPU
        check_cuda_graphs(run)
    console.cpu_precision_warning(options.precision, accelerator)
    options.data.preflight(run, world=world_size(run))
    classes = num_classes(run, options.data)
    options.profiler.preflight(run)
    choices = {"dist.accelerator": accelerator, "model.num_classes": classes, **cuda_graph_keys(run.model)}
    return Preflight(decided(cfg, choices), options)


def num_classes(cfg: DictConfig, pipeline=None) -> int:
    """The network's classes: model.num_classes, or where it is null the data's classes (class folders),
    else ImageNet's 1000; a head narrower than the data's labels is refused (a label past it cannot be
    learned). pipeline: the run's data option, where the caller has it."""
    found = (pipeline or pipelines.of(cfg)).classes(cfg)
    if cfg.model.num_classes is None:
        return found or reads.DEFAULT_CLASSES
    if found:
        checks.check_classes(cfg.data.root, cfg.model.num_classes, found)
    return cfg.model.num_classes


def process_rank(cfg: DictConfig, cluster) -> int:
    """This process's global rank: 0 for cluster=local, whose ranks are its children; else
    the rank torchrun or SLURM gave it, once the number of processes matches dist. cluster: the
    run's cluster option."""
    if cluster.rank_env is None:
        return 0
    rank_key, world_key = cluster.rank_env
    if rank_key not in os.environ:
        raise ConfigError(f"cluster={cfg.cluster.name} but {cluster.starter} did not start this process "
                          f"({rank_key} is not set); {cluster.start_hint}")
    cluster.check_started(cfg)
    world, wanted = int(os.environ[world_key]), world_size(cfg)
    if world != wanted:
        raise ConfigError(
            f"dist={dist_name(cfg)} needs {wanted} processes but {cluster.starter} started {world}; start "
            f"{cfg.dist.nodes} node(s) of {cfg.dist.gpus_per_node} process(es), or set dist to match"
        )
    return int(os.environ[rank_key])


def submit(cfg: DictConfig, config_yaml: str, out: Path, options: Options) -> Callable[[], list]:
    """Start the run's ranks; the returned call waits for every rank's RankResult (RunFailed
    names the first failure). On this host the ranks start now, importing torch and making
    their CUDA contexts while this process opens the MLflow run; under torchrun and SLURM this
    process is rank 0 and runs its rank when the call is made. options: the run's, from preflight."""
    if options.cluster.rank_env is not None:  # this process is rank 0 of processes the cluster started
        return lambda: run_rank_here(cfg, out, options)
    own = options.profiler.launcher(cfg, config_yaml, out)  # ncu starts its one rank itself
    return own or pool.submit(cfg.dist.gpus_per_node, cfg.dist.accelerator.value, config_yaml, out)


@contextlib.contextmanager
def started(cfg: DictConfig, config_yaml: str, out: Path, options: Options) -> Iterator[Callable[[], list]]:
    """submit() for the block: if the block fails before the results came back, the ranks
    are killed, so that a warm pool never holds a task nobody waits for."""
    results = submit(cfg, config_yaml, out, options)
    try:
        yield results
    except BaseException:
        pool.close_all(kill=True)
        raise


def run_rank_here(cfg: DictConfig, out: Path, options: Options) -> Optional[list]:
    """Run this process's rank: torchrun or SLURM started it as one (rn50/rank/here.py). options:
    the run's, from preflight."""
    # A SLURM sweep's task runs this without `python -m rn50` having run here (submitit sends the task itself)
    bytecode.set_bytecode_cache()
    with lasting_imports():
        from rn50.rank import here  # deferred: only a process that torchrun or SLURM made a rank imports torch

    return here.run_rank_here(cfg, out, options)


def dry_run(cfg: DictConfig, overrides, cluster=None) -> str:
    """What dry_run=true prints, after the checks that can be made from this host. cluster: the run's
    cluster option, where the caller built it."""
    options = Options.of(cfg, cluster=cluster)
    run = preflight(cfg, here=options.cluster.rank_env is None, options=options).cfg
    return options.cluster.dry_run(run, list(overrides))  # a SLURM --multirun's jobs print from hydra_plugins/
