"""cluster=slurm: what each SLURM job asks for, and the checks made before submitting.
A job's life (its run, submission, waiting) is in rn50/launcher/slurm_jobs.py.

Each job asks for dist.nodes nodes, one task per device and dist.gpus_per_node GPUs
per node, plus the cluster.* keys and hydra.launcher's (hydra-submitit-launcher's).
"""

import contextlib
import functools
import os
import re
import shutil
import signal
import subprocess
from typing import Any, Dict, Iterator, Optional

import submitit
from hydra.core.hydra_config import HydraConfig
from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
from omegaconf import DictConfig, OmegaConf

from rn50.config.schema import Accelerator, TrainName

from rn50.config.reads import dist_name
from rn50.errors import ConfigError

SUBMITIT_GENERIC = set(OmegaConf.structured(BaseQueueConf).keys())
SWEEP_FOLDER = BaseQueueConf.submitit_folder  # hydra-submitit-launcher's: under the sweep's directory
# Lightning's default: SLURM sends it ahead of the time limit (--signal in conf/train/accuracy.yaml).
REQUEUE_SIGNAL = signal.SIGUSR1
# train=accuracy: seconds before the time limit at which SLURM sends USR1 (REQUEUE_SIGNAL);
# an epoch-end checkpoint of ResNet-50 takes seconds, so this leaves room for a slow file system.
REQUEUE_S = 120


def resources(cfg: DictConfig, launcher_params: Dict[str, Any]) -> Dict[str, Any]:
    """The hydra.launcher parameters of one job: the launcher's keys, then dist and cluster.*."""
    params = {k: v for k, v in launcher_params.items() if k not in ("submitit_folder", "max_num_timeout")}
    c = cfg.cluster
    params.update(
        nodes=cfg.dist.nodes,
        tasks_per_node=cfg.dist.gpus_per_node,
        gpus_per_node=None if cfg.dist.accelerator == Accelerator.cpu else cfg.dist.gpus_per_node,
        timeout_min=c.timeout_min,
        # A bare flag (+cluster.sbatch.exclusive=) is True for submitit, which writes it bare.
        additional_parameters={**params.get("additional_parameters", {}),
                               **{k: True if v == "" else v for k, v in c.sbatch.items()}},
        # One failed rank ends the job, instead of the others waiting in a collective.
        srun_args=params.get("srun_args") or ["--kill-on-bad-exit=1"],
    )
    if cfg.train.name == TrainName.accuracy:
        # SLURM signals the tasks REQUEUE_S before the time limit; Lightning's SLURM environment
        # (rn50/rank/run.py) saves a checkpoint and requeues the job, which resumes in the same run.
        params["additional_parameters"] = {"signal": f"USR1@{REQUEUE_S}", "requeue": True,
                                           **params["additional_parameters"]}
    for key in ("cpus_per_task", "partition", "account", "qos"):
        if c[key] is not None:
            params[key] = c[key]
    return params


def submitit_parameters(params: Dict[str, Any]) -> Dict[str, Any]:
    """submitit's names for them: its generic ones as they are, the rest prefixed slurm_."""
    return {k if k in SUBMITIT_GENERIC else f"slurm_{k}": v for k, v in params.items()}


def describe(params: Dict[str, Any]) -> str:
    """The sbatch options a job gets, as sbatch would read them."""
    flags = {
        "nodes": params["nodes"], "ntasks-per-node": params["tasks_per_node"],
        "gpus-per-node": params.get("gpus_per_node"), "cpus-per-task": params.get("cpus_per_task"),
        "time": f"{params['timeout_min']}", "partition": params.get("partition"),
        "account": params.get("account"), "qos": params.get("qos"), **params["additional_parameters"],
    }
    return " ".join(f"--{k}" if v is True else f"--{k}={v}" for k, v in flags.items() if v is not None)


@functools.lru_cache(maxsize=None)  # one sinfo per partition, however many points a sweep has
def partition_nodes(partition: Optional[str]) -> tuple:
    """(name, node count) of the partition, or of the default one when partition is None."""
    if shutil.which("sinfo") is None:
        raise ConfigError("cluster=slurm needs SLURM's sinfo and sbatch on PATH; run from a SLURM login node")
    args = ["sinfo", "--noheader", "--format=%P %D"] + ([f"--partition={partition}"] if partition else [])
    done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise ConfigError(f"cluster=slurm: sinfo failed: {' '.join(done.stderr.split())}")
    counts: Dict[str, int] = {}
    default = None
    for line in done.stdout.splitlines():
        name, count = line.split()
        if name.endswith("*"):
            name = default = name[:-1]
        counts[name] = counts.get(name, 0) + int(count)
    name = partition or default
    if name not in counts:
        raise ConfigError(f"cluster.partition={partition} is not a SLURM partition; partitions: {', '.join(counts)}"
                          if partition else "cluster.partition is not set and SLURM has no default partition")
    return name, counts[name]


def check_nodes(cfg: DictConfig) -> None:
    """The partition has the nodes dist asks for."""
    name, nodes = partition_nodes(cfg.cluster.partition)
    if cfg.dist.nodes > nodes:
        raise ConfigError(
            f"dist={dist_name(cfg)} needs {cfg.dist.nodes} nodes but SLURM partition {name} has {nodes}; "
            f"use a dist option with at most {nodes} node(s), or another cluster.partition"
        )


def launcher_params() -> Dict[str, Any]:
    """hydra.launcher's keys (hydra-submitit-launcher's, conf/cluster/slurm.yaml), as the launcher
    gets them, for a run that is not a --multirun."""
    launcher = OmegaConf.to_container(HydraConfig.get().launcher, resolve=True)
    return {k: v for k, v in launcher.items() if k != "_target_"}


def submit(launcher: Dict[str, Any], job: Dict[str, Any], fn, *args):
    """fn(*args) as a SLURM job asking for `job` (resources()), in hydra.launcher's submitit folder,
    submitted as from a login node (outside_job); submitit's Job."""

    executor = submitit.AutoExecutor(folder=launcher["submitit_folder"], cluster="slurm",
                                     slurm_max_num_timeout=launcher["max_num_timeout"])
    executor.update_parameters(**submitit_parameters(job))
    with outside_job():
        return executor.submit(fn, *args)


@contextlib.contextmanager
def outside_job() -> Iterator[None]:
    """Submit as from a login node: inside an sbatch script, sbatch would pass the job's own
    variables (its memory, tasks, step) on to the new job, whose srun would take them. Outside a
    job nothing changes, and the user's own settings stay everywhere: SBATCH_* (account,
    partition), SLURM_CONF and SLURM_CLUSTERS (which cluster squeue then asks too)."""
    keep, inside = ("SLURM_CONF", "SLURM_CLUSTERS"), "SLURM_JOB_ID" in os.environ
    job = {k: os.environ.pop(k) for k in list(os.environ) if inside
           and k.startswith(("SLURM_", "SLURMD_", "SRUN_", "SUBMITIT_")) and k not in keep}
    try:
        yield
    finally:
        os.environ.update(job)


def restarts(job_id: str) -> Optional[int]:
    """How often SLURM has requeued the job (scontrol's Restarts), or None where it cannot say."""
    try:
        done = subprocess.run(["scontrol", "--oneliner", "show", "job", job_id], capture_output=True, text=True,
                              timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r"\bRestarts=(\d+)", done.stdout)
    return int(found.group(1)) if done.returncode == 0 and found else None
