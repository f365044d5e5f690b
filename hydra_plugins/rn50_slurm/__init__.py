"""rn50's SLURM launcher for Hydra (cluster=slurm), built on hydra-submitit-launcher.

The plugin's own launcher gives every job of a sweep the resources of the sweep's
first config. This one works them out per job (rn50/slurm/sbatch.py), checks every job
before anything is submitted, makes each job's MLflow run and passes its id to the job
(mlflow.run_id), submits them all (they may run at once), waits, and closes by id the
runs of jobs that SLURM ended before their rank 0 could. A sweep.resume point that
finished before is neither made nor submitted again.
"""

import logging
import os
from typing import Optional, Sequence

from hydra.core.hydra_config import HydraConfig
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, filter_overrides
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher as SubmititSlurmLauncher
from omegaconf import DictConfig

from rn50.config import reads
from rn50.launcher import launch, slurm_jobs
from rn50.launcher.stop import PARENT_ENV
from rn50.point import identity
from rn50.slurm import sbatch as slurm
from rn50 import tracking

log = logging.getLogger("rn50")


class SlurmLauncher(SubmititSlurmLauncher):
    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        HydraConfig.instance().set_config(self.config)  # resolves ${hydra:runtime.cwd} in the job configs
        configs = [self.hydra_context.config_loader.load_sweep_config(self.config, list(o)) for o in job_overrides]
        hashes = [identity.config_hash(cfg) for cfg in configs]  # as composed, as each job's run is tagged
        configs = [launch.preflight(cfg, here=False).cfg for cfg in configs]  # each job's run, as decided
        plans = [slurm.resources(cfg, self.params) for cfg in configs]
        if self.config.dry_run:  # what would be asked for, whatever this host's SLURM has
            for idx, (overrides, params) in enumerate(zip(job_overrides, plans), initial_job_idx):
                point = " ".join(o for o in filter_overrides(overrides) if not o.startswith(("cluster=", "dry_run=")))
                print(f"job {idx}: sbatch {slurm.describe(params)}  # {point or 'defaults'}")
            return []
        for cfg in configs:
            slurm.check_nodes(cfg)
        for uri in {cfg.mlflow.tracking_uri for cfg in configs}:
            tracking.health.check_reachable(uri)

        parent = os.environ.get(PARENT_ENV)
        points = [(idx, list(overrides), cfg, params) for idx, (overrides, cfg, params)
                  in enumerate(zip(job_overrides, configs, plans), initial_job_idx)]
        done = {idx: self._finished_before(cfg, parent, overrides, hashes[idx - initial_job_idx])
                for idx, overrides, cfg, _ in points}
        runs, jobs = {}, {}
        try:
            for idx, overrides, cfg, _ in points:
                if done[idx] is None:
                    runs[idx] = slurm_jobs.make_run(cfg, parent, hashes[idx - initial_job_idx], overrides)
            for idx, overrides, cfg, params in points:
                if idx not in runs:
                    continue
                jobs[idx] = slurm.submit(self.params, params, self, [*overrides, f"mlflow.run_id={runs[idx]}"],
                                         "hydra.sweep.dir", idx, f"job_id_for_{idx}", Singleton.get_state())
                log.info("#%d: SLURM job %s: sbatch %s", idx, jobs[idx].job_id, slurm.describe(params))
        except BaseException as exc:
            slurm_jobs.not_submitted(exc, [(cfg, runs[idx]) for idx, _, cfg, _ in points if idx in runs and idx not in jobs])
        for idx, _, cfg, _ in points:  # which job records into which run, for whoever reads the runs
            if idx in jobs:
                tracking.runs.log_results(cfg.mlflow.tracking_uri, runs[idx], {}, {"slurm_job_id": jobs[idx].job_id})
        return [done[idx] or self._wait(jobs[idx], cfg, overrides, runs[idx]) for idx, overrides, cfg, _ in points]

    @staticmethod
    def _finished_before(cfg: DictConfig, parent, overrides, config_hash: str) -> Optional[JobReturn]:
        """sweep.resume: the JobReturn of a point that FINISHED before in this sweep, or None to run it."""
        if not (parent and cfg.sweep.resume):
            return None
        earlier = tracking.sweeps.earlier_point(cfg.mlflow.tracking_uri, parent, config_hash)
        if not tracking.sweeps.done_before(earlier):
            return None
        log.info("%s: finished before as run %s, not submitted again", reads.run_name(cfg), earlier.info.run_id)
        return JobReturn(overrides=list(overrides), status=JobStatus.COMPLETED,
                         _return_value={"run_id": earlier.info.run_id, **earlier.data.metrics})

    def checkpoint(self, *args, **kwargs) -> None:
        """No requeue by submitit on preemption or time-out (submitit asks this): a benchmark is not
        resumed, and a train=accuracy job is requeued by Lightning, on USR1 (rn50/slurm/sbatch.py)."""
        return None

    def _wait(self, job, cfg: DictConfig, overrides, run_id: str) -> JobReturn:
        """Rank 0's JobReturn; the run of a job that failed, or that SLURM ended early, is closed by
        its id where its rank 0 could not close it."""
        ok, result = slurm_jobs.outcome(job, cfg, run_id, check=lambda r: r.return_value)  # raises rank 0's error
        if ok:
            return result
        if not os.environ.get(PARENT_ENV):  # one run, not a sweep: its failure is the command's
            raise slurm_jobs.failed(job, cfg, run_id)
        log.warning("%s", slurm_jobs.failed(job, cfg, run_id))  # one line, the run's own error; the sweep goes on
        return JobReturn(overrides=list(overrides), status=JobStatus.COMPLETED)
