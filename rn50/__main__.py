"""python -m rn50: compose a run, start its processes, record it in MLflow.

The processes (rn50/worker.py) build the model, fit, measure and log the
figures; this process owns the MLflow run, so a run whose processes crash,
run out of memory or are interrupted is still closed with the right status.
In a --multirun each job is a child of the sweep's run (rn50/sweep.py).
"""

import json
import logging
import os
import socket
from pathlib import Path
from typing import Optional

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from rn50 import console, launch, ncu, schema, slurm, tracking
from rn50.environment import git_commit
from rn50.errors import ConfigError, RunFailed, reported
from rn50.schema import ClusterName
from rn50.sweep import PARENT_ENV, URI_ENV

log = logging.getLogger("rn50")


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def run(cfg: DictConfig) -> Optional[dict]:
    # Report here: an exception leaving the task makes Hydra print more than one line,
    # and in a sweep it would stop the remaining jobs and the report. A SLURM task is
    # one rank: it must fail visibly, so that submitit records the failure and srun
    # stops the other ranks instead of leaving them waiting in a collective.
    slurm_task = cfg.cluster.name == ClusterName.slurm and "SLURM_PROCID" in os.environ
    with reported(exit=HydraConfig.get().mode != RunMode.MULTIRUN, reraise=slurm_task):
        return benchmark(cfg, parent=os.environ.get(PARENT_ENV))


def benchmark(cfg: DictConfig, parent: Optional[str]) -> Optional[dict]:
    hydra_cfg = HydraConfig.get()
    out = Path(hydra_cfg.runtime.output_dir)
    name = schema.run_name(cfg)
    if cfg.dry_run:
        launch.preflight(cfg, here=cfg.cluster.name == ClusterName.local)
        if cfg.cluster.name == ClusterName.slurm:  # hydra.mode=RUN, as in launchers/rn50.sbatch
            print(f"sbatch {slurm.describe(slurm.resources(cfg, {}))}")
        else:
            print(launch.plan(cfg, hydra_cfg.overrides.task))
        return None
    rank = launch.process_rank(cfg)
    uri = cfg.mlflow.tracking_uri
    if rank == 0:
        tracking.check_reachable(uri)
    try:
        launch.preflight(cfg)
    except ConfigError as exc:
        if parent and rank == 0:  # a sweep point that cannot run is still a row of the report
            run_id = tracking.start_run(cfg, name, run_tags(cfg, out), parent)
            tracking.end_run(uri, run_id, ok=False, tags={"failure": "config", "error": str(exc)})
        raise
    if rank != 0:  # a torchrun or SLURM rank other than 0: rank 0 records the run
        launch.run_here(cfg, None, out)
        return None

    config_file = out / "resolved_config.yaml"
    config_file.write_text(OmegaConf.to_yaml(cfg, resolve=True))
    run_id = tracking.start_run(cfg, name, run_tags(cfg, out), parent)
    try:
        tracking.log_results(uri, run_id, {}, artifacts=[str(config_file)])
        worker_args = [str(config_file), "--run-id", run_id, "--out", str(out)]
        if cfg.cluster.name != ClusterName.local:  # torchrun or SLURM started this process as rank 0
            launch.run_here(cfg, run_id, out)
        elif cfg.profiler.name == schema.ProfilerName.ncu:  # the one process runs under Nsight Compute
            metrics, files = ncu.run(cfg, out, worker_args)
            tracking.log_results(uri, run_id, metrics, artifacts=files)
        else:
            launch.run_local(cfg.dist.gpus_per_node, worker_args)
    except RunFailed as exc:
        tracking.end_run(uri, run_id, ok=False, tags={"failure": exc.kind, "error": str(exc)[:500]})
        raise
    except BaseException as exc:
        if isinstance(exc, SystemExit) and cfg.cluster.name != ClusterName.local:
            # Lightning's SIGTERMException: torchrun or srun stopping every rank.
            tracking.end_run(uri, run_id, ok=False, tags={
                "failure": "stopped", "error": "stopped by SIGTERM: another rank failed, or the job was cancelled"})
        else:
            tracking.end_run(uri, run_id, ok=False, killed=True)
        raise
    tracking.end_run(uri, run_id, ok=True)

    summary = json.loads((out / "summary.json").read_text())
    log.info(
        "%s: %.1f images/sec (%.1f per device), step %.2f ms median; MLflow run %s",
        name, summary["throughput/images_per_sec"], summary["throughput/images_per_sec_per_device"],
        summary["step_time/median_ms"], run_id,
    )
    return summary


def run_tags(cfg: DictConfig, out: Path) -> dict:
    commit = git_commit()
    overrides = HydraConfig.get().overrides.task
    return {
        "command": " ".join(["python -m rn50", *overrides]),
        "launch_host": socket.gethostname(),
        "output_dir": str(out),
        "dist": schema.dist_name(cfg),
        "cluster": cfg.cluster.name.value,
        # Lets the submitting host find a job's run when SLURM kills the job (rn50/slurm.py).
        **({"slurm_job_id": os.environ["SLURM_JOB_ID"]} if "SLURM_JOB_ID" in os.environ else {}),
        **({"git_commit": commit, "mlflow.source.git.commit": commit} if commit else {}),
    }


def main() -> None:
    # Let errors reach `reported`, which prints one line, instead of Hydra's multi-line printer.
    os.environ["HYDRA_FULL_ERROR"] = "1"
    console.quiet()
    try:
        with reported():
            run()
    except BaseException as exc:
        # A sweep stopped before its end (a job that does not compose, Ctrl-C) closes its parent run.
        parent = os.environ.pop(PARENT_ENV, None)
        if parent and not (isinstance(exc, SystemExit) and exc.code in (0, None)):
            tracking.end_run(os.environ[URI_ENV], parent, ok=False, killed=isinstance(exc, KeyboardInterrupt))
        raise


if __name__ == "__main__":
    main()
