"""The rank half of the cluster options (rn50/options/clusters.py): the Lightning cluster
environment that says who started a rank, and torch's default process group, as Lightning's DDP
would start it."""

import os

import torch.distributed as dist
from pytorch_lightning.plugins.environments import LightningEnvironment, SLURMEnvironment, TorchElasticEnvironment
from torch.distributed.constants import default_pg_timeout

from rn50.slurm.sbatch import REQUEUE_SIGNAL


def started_by_rn50() -> list:
    """rn50's pool started the ranks: Lightning would otherwise take SLURM's variables over rn50's
    whenever a SLURM allocation surrounds a local run."""
    return [LightningEnvironment()]


def torchrun() -> list:
    """torchrun's environment, where torchrun started this process; else none."""
    return [TorchElasticEnvironment()] if TorchElasticEnvironment.detect() else []


def slurm(requeue: bool) -> SLURMEnvironment:
    """SLURM's environment; a train=accuracy run (requeue) is requeued on REQUEUE_SIGNAL and resumes."""
    return SLURMEnvironment(auto_requeue=requeue, requeue_signal=REQUEUE_SIGNAL)


def join_from_env(backend: str, device_id) -> None:
    """From the env:// variables (RANK, WORLD_SIZE, MASTER_*) that rn50's pool and torchrun set."""
    dist.init_process_group(backend, timeout=default_pg_timeout, device_id=device_id)


def join_from_slurm(backend: str, device_id) -> None:
    """From SLURM's variables, read as Lightning's SLURM environment reads them."""
    env = SLURMEnvironment(auto_requeue=False)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = env.main_address, str(env.main_port)
    dist.init_process_group(backend, rank=env.global_rank(), world_size=env.world_size(),
                            timeout=default_pg_timeout, device_id=device_id)
