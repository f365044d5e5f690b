"""Clusters as components: each conf/cluster/*.yaml names its class with `_target_`, and Hydra's
instantiate builds it from the option's keys (cfg.cluster, typed by the option's own schema:
slurm's partition, account, qos, timeout_min, cpus_per_task and sbatch; torchrun's rdzv_endpoint).
A class says how a run's processes start:

- check(cfg): compose-time checks of its keys (ConfigError, one line naming the key);
- rank_env: the variables of this process's rank and the world size its starter sets, or None
  where rn50 starts the ranks itself (rn50/launcher/pool.py);
- in_task(): whether this process is a task the cluster's scheduler started, whose failure must
  end it visibly (SLURM);
- requeued(): whether the scheduler has requeued this task's job while it ran, so that whatever
  broke as it was stopped is no failure: the job starts again and goes on with its run (SLURM);
- submits(): whether `python -m rn50` here hands the run to the cluster's scheduler and waits for
  it (SLURM, outside a task: rn50/launcher/slurm_jobs.py) rather than running a rank itself;
- dry_run(cfg, overrides): what dry_run=true prints;
- environment(requeue): the Lightning cluster environment of each rank;
- join(backend, device_id): torch's default process group, as Lightning's DDP would start it.

The launcher builds these objects too, so this module imports neither torch nor Lightning: what a
rank needs of a cluster (its Lightning environment, its process group) is built by
rn50/distributed/peers.py, reached by `in_rank()`. Adding a cluster is one YAML file and
one class, as for data pipelines.
"""

import os
import shlex
import uuid
from typing import List, Optional, Tuple

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from rn50.config.reads import dist_name, positive
from rn50.errors import ConfigError
from rn50.options import components
from rn50.wire import POOL_ENV
from rn50.slurm import sbatch as slurm


def in_rank():
    """The rank half of the clusters (rn50/distributed/peers.py): Lightning and torch.distributed."""
    from rn50.distributed import peers  # deferred: only a rank imports torch; the launcher builds clusters too

    return peers


def of(cfg: DictConfig) -> "Cluster":
    """The run's cluster object, built from cfg.cluster's `_target_`. A run builds it once, with the
    other options (components.Options), and hands it on; this is for a caller that has none."""
    return components.of(cfg, "cluster")


class Cluster(components.Component):
    """What every cluster answers; the base runs every rank on this host, started by rn50."""

    rank_env: Optional[Tuple[str, str]] = None
    """(rank, world size): the variables the cluster's starter sets in each process."""
    starter, start_hint = "", ""
    """Who starts the processes, and how to, for the error of a process it did not start."""

    def check_started(self, cfg: DictConfig) -> None:
        """Checks of a process the cluster's starter started; none by default."""

    def in_task(self) -> bool:
        return False

    def requeued(self) -> bool:
        return False

    def submits(self) -> bool:
        return False

    def dry_run(self, cfg: DictConfig, overrides: List[str]) -> str:
        return (f"dist={dist_name(cfg)}: {cfg.dist.gpus_per_node} {cfg.dist.accelerator.value} process(es) on "
                "this host, kept warm between runs of a sweep")

    def environment(self, requeue: bool) -> list:
        """Say who started the ranks: Lightning would otherwise take SLURM's variables over rn50's
        whenever a SLURM allocation surrounds a local run."""
        return in_rank().started_by_rn50() if POOL_ENV in os.environ else []

    def join(self, backend: str, device_id) -> None:
        """From the env:// variables (RANK, WORLD_SIZE, MASTER_*) that rn50's pool and torchrun set."""
        in_rank().join_from_env(backend, device_id)


class Local(Cluster):
    """One process per device on this host, started and kept warm by rn50 (rn50/launcher/pool.py)."""

    name = "local"


class Torchrun(Cluster):
    """The processes of a torchrun the user started on each node (c10d rendezvous)."""

    name, rank_env = "torchrun", ("RANK", "WORLD_SIZE")
    starter = "torchrun"
    start_hint = "run the commands that `python -m rn50 cluster=torchrun dry_run=true` prints on each node"

    def check_started(self, cfg: DictConfig) -> None:
        if os.environ.get("TORCHELASTIC_RUN_ID", "none") == "none":
            # It names the output directory all ranks share (conf/cluster/torchrun.yaml).
            raise ConfigError("cluster=torchrun needs torchrun's --rdzv-id, the same on every node; "
                              "the commands that dry_run=true prints carry one")

    def dry_run(self, cfg: DictConfig, overrides: List[str]) -> str:
        """Each node's torchrun command."""
        name, nodes, per_node = dist_name(cfg), cfg.dist.nodes, cfg.dist.gpus_per_node
        args = [o for o in overrides if not o.startswith(("dry_run=", "cluster="))]
        command = shlex.join([
            "torchrun", f"--nnodes={nodes}", f"--nproc-per-node={per_node}", "--rdzv-backend=c10d",
            f"--rdzv-endpoint={self.keys.rdzv_endpoint}", f"--rdzv-id=rn50-{uuid.uuid4().hex[:8]}",
            "-m", "rn50", "cluster=torchrun", *args,
        ])
        lines = [f"dist={name}: {nodes} node(s) x {per_node} {cfg.dist.accelerator.value} process(es); run on "
                 f"each node, node 0 at {self.keys.rdzv_endpoint.rsplit(':', 1)[0]} (the rendezvous numbers "
                 "the nodes):"]
        return "\n".join(lines + [f"node {i}: {command}" for i in range(nodes)])

    def environment(self, requeue: bool) -> list:
        return in_rank().torchrun() or super().environment(requeue)


class Slurm(Cluster):
    """One SLURM job per run, a task per device. Run from a login node, `python -m rn50 cluster=slurm`
    submits the job itself (rn50/launcher/slurm_jobs.py; a --multirun's jobs: hydra_plugins/rn50_slurm); run by
    srun, as each of the job's tasks is, it is one rank."""

    name, rank_env = "slurm", ("SLURM_PROCID", "SLURM_NTASKS")
    starter, start_hint = "SLURM", "submit with `python -m rn50 cluster=slurm` from a host with sbatch"

    def check(self, cfg: DictConfig) -> None:
        positive(cfg, "cluster.timeout_min", "use a time limit of 1 minute or more")
        if self.keys.cpus_per_task is not None:
            positive(cfg, "cluster.cpus_per_task", "use 1 or more, or null for SLURM's default")

    def in_task(self) -> bool:
        """A task of a job step, which srun starts: one rank, which must fail visibly, so that
        submitit records the failure and srun stops the other ranks instead of leaving them waiting
        in a collective. Not the shell of sbatch's batch script, which has SLURM_PROCID too: a
        command there submits a job of its own, as on a login node."""
        return "SLURM_STEP_ID" in os.environ

    def requeued(self) -> bool:
        """`scontrol requeue` or a preemption stops a job with SIGTERM, as scancel does, but counts
        a restart first: the job's count has gone past the one this start was given."""
        if not self.in_task():
            return False
        now = slurm.restarts(os.environ.get("SLURM_JOB_ID", ""))
        return now is not None and now > int(os.environ.get("SLURM_RESTART_COUNT") or 0)

    def submits(self) -> bool:
        """Outside a task (a login node, a batch script): one job for the run."""
        if self.in_task():
            return False
        if HydraConfig.get().mode == RunMode.MULTIRUN:  # hydra/launcher was overridden
            raise ConfigError("cluster=slurm in a --multirun needs rn50's SLURM launcher; leave "
                              "hydra/launcher as conf/cluster/slurm.yaml sets it")
        return True

    def dry_run(self, cfg: DictConfig, overrides: List[str]) -> str:
        return f"sbatch {slurm.describe(slurm.resources(cfg, slurm.launcher_params()))}"

    def environment(self, requeue: bool) -> list:
        """A benchmark is not resumed; a train=accuracy run is requeued on REQUEUE_SIGNAL and resumes."""
        return [in_rank().slurm(requeue)]

    def join(self, backend: str, device_id) -> None:
        """From SLURM's variables, read as Lightning's SLURM environment reads them."""
        in_rank().join_from_slurm(backend, device_id)
