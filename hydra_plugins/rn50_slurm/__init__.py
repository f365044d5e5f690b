"""rn50's SLURM launcher for Hydra (cluster=slurm), built on hydra-submitit-launcher.

The plugin's own launcher gives every job of a sweep the resources of the sweep's
first config. This one works them out per job (rn50/slurm.py), checks every job
before anything is submitted, submits them all (they may run at once), waits, and
closes in MLflow the runs of jobs that SLURM ended before their rank 0 could.
"""

import logging
import os
import time
from typing import Sequence

from hydra.core.hydra_config import HydraConfig
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, filter_overrides
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher as SubmititSlurmLauncher
from omegaconf import DictConfig

from rn50 import launch, slurm, tracking
from rn50.errors import RunFailed
from rn50.sweep import PARENT_ENV

log = logging.getLogger("rn50")


class SlurmLauncher(SubmititSlurmLauncher):
    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        import submitit

        HydraConfig.instance().set_config(self.config)  # resolves ${hydra:runtime.cwd} in the job configs
        configs = [self.hydra_context.config_loader.load_sweep_config(self.config, list(o)) for o in job_overrides]
        for cfg in configs:
            launch.preflight(cfg, here=False)
        plans = [slurm.resources(cfg, self.params) for cfg in configs]
        if self.config.dry_run:  # what would be asked for, whatever this host's SLURM has
            for idx, (overrides, params) in enumerate(zip(job_overrides, plans), initial_job_idx):
                point = " ".join(o for o in filter_overrides(overrides) if not o.startswith(("cluster=", "dry_run=")))
                print(f"job {idx}: sbatch {slurm.describe(params)}  # {point or 'defaults'}")
            return []
        for cfg in configs:
            slurm.check_nodes(cfg)
        for uri in {cfg.mlflow.tracking_uri for cfg in configs}:
            tracking.check_reachable(uri)

        executor = submitit.AutoExecutor(
            folder=self.params["submitit_folder"], cluster="slurm",
            slurm_max_num_timeout=self.params["max_num_timeout"],
        )
        jobs, submitted_ms = [], int(time.time() * 1000)
        for idx, (overrides, params) in enumerate(zip(job_overrides, plans), initial_job_idx):
            executor.update_parameters(**slurm.submitit_parameters(params))
            job = executor.submit(self, list(overrides), "hydra.sweep.dir", idx, f"job_id_for_{idx}",
                                  Singleton.get_state())
            log.info("#%d: SLURM job %s: sbatch %s", idx, job.job_id, slurm.describe(params))
            jobs.append(job)
        return [self._wait(job, cfg, overrides, submitted_ms) for job, cfg, overrides in zip(jobs, configs, job_overrides)]

    def checkpoint(self, *args, **kwargs) -> None:
        """No requeue by submitit on preemption or time-out (submitit asks this): a benchmark is not
        resumed, and a train=accuracy job is requeued by Lightning, on USR1 (rn50/slurm.py)."""
        return None

    def _wait(self, job, cfg: DictConfig, overrides, submitted_ms: int) -> JobReturn:
        """The job's JobReturn; a job SLURM ended early gets its run closed, or a failed row made."""
        try:
            result = job.results()[0]  # rank 0's
            summary = result.return_value
        except Exception as exc:  # submitit raises for a failed or killed job
            error = f"SLURM job {job.job_id} ended: {slurm.last_line(job, exc)}"
            slurm.close_orphan(cfg, job.job_id, error, submitted_ms)
            result, summary = JobReturn(overrides=list(overrides), status=JobStatus.COMPLETED), None
            if os.environ.get(PARENT_ENV):
                log.warning("%s", error)
        if summary is None and not os.environ.get(PARENT_ENV):
            # One run, not a sweep: its failure is the command's (a sweep's is in its report).
            raise RunFailed(f"SLURM job {job.job_id} failed; the MLflow run's error tag and the job's log "
                            f"{job.paths.stderr} say why")
        return result
