"""python -m rn50: compose a run, check it, record it in MLflow, launch its ranks.

This process never imports torch or Lightning: the ranks do (rn50/rank/run.py), kept warm
between the points of a sweep (rn50/launcher/pool.py), and send their measurements back; this
process owns the MLflow run, so a run whose ranks crash, run out of memory or are
interrupted is still closed with the right status. In a --multirun each job is a
child of the sweep's run (rn50/launcher/sweep.py).
"""

import logging
import os
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Optional

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from rn50 import STARTED, console
from rn50.options import clusters
from rn50.launcher import launch
from rn50.options import pipelines
from rn50.launcher import pool
from rn50.results import summary as results
from rn50.results import resume
from rn50.config import schema
from rn50.tracking import store as tracking
from rn50.measure import trained
from rn50.tracking import upload
from rn50.config.directory import config_dir
from rn50.measure.environment import git_commit
from rn50.errors import ConfigError, Interrupted, RunFailed, failure_kind, reported
from rn50.config.schema import TrainName
from rn50.launcher.sweep import PARENT_ENV, URI_ENV

log = logging.getLogger("rn50")


@hydra.main(version_base="1.3", config_path=config_dir(), config_name="config")
def run(cfg: DictConfig) -> Optional[dict]:
    # Report here: an exception leaving the task makes Hydra print more than one line,
    # and in a sweep it would stop the remaining jobs and the report. A SLURM task of a
    # sweep is one rank of a point: its error goes on to the launcher in its JobReturn.
    sweep = HydraConfig.get().mode == RunMode.MULTIRUN
    try:
        task = clusters.of(cfg).in_task()
    except ConfigError:  # a cluster that cannot be built: the checks below say so, in one line
        task = False
    with reported(exit=not sweep, reraise=task and sweep):
        parent = os.environ.get(PARENT_ENV)
        return benchmark(cfg, parent, started=time.time() if parent else STARTED)


def benchmark(cfg: DictConfig, parent: Optional[str], started: float) -> Optional[dict]:
    out = Path(HydraConfig.get().runtime.output_dir)
    cfg = launch.for_this_host(cfg)  # device=auto on a host without a GPU: the CPU profile
    name = schema.run_name(cfg)
    if cfg.dry_run:
        print(launch.dry_run(cfg, HydraConfig.get().overrides.task))
        return None
    submitted = clusters.of(cfg).submit(cfg, out, schema.config_hash(cfg), sys.argv[1:])  # SLURM, from a login node
    if submitted is not None:
        return say_done(cfg, name, submitted, out, parent)
    rank = launch.process_rank(cfg)
    tags = run_tags(cfg, out)  # before the checks resolve dist.accelerator: the point's hash as composed
    try:
        launch.preflight(cfg)
        params = tracking.config_params(cfg)
        continued = resume.run_to_continue(cfg, out, params)  # train.resume, or a requeued SLURM job
        tracking.check_reachable(cfg.mlflow.tracking_uri, open_store=False)
    except ConfigError as exc:
        if (parent or cfg.mlflow.run_id) and rank == 0:  # a sweep point that cannot run is still a row
            tracking.record_failure(cfg, name, tags, parent, exc)
        raise
    name = schema.run_name(cfg)  # with the accelerator resolved: a run that fell back to the CPU says so
    # Every rank asks, so that all of a SLURM job's tasks skip together; a job whose run was made
    # before it was submitted (mlflow.run_id) was already asked about by its launcher.
    if parent and cfg.sweep.resume and not cfg.mlflow.run_id:
        done = finished_before(cfg, parent, tags[tracking.HASH_TAG], name, say=rank == 0)
        if done is not None:
            return described(cfg, done)
    if rank != 0:  # a torchrun or SLURM rank other than 0: rank 0 records the run
        launch.run_rank_here(cfg, out)
        return None

    config_yaml = OmegaConf.to_yaml(cfg, resolve=True)
    (out / "resolved_config.yaml").write_text(config_yaml)
    uri, kept = cfg.mlflow.tracking_uri, upload.result_file(out)
    with launch.started(cfg, config_yaml, out) as ranks_done:  # the ranks start while MLflow opens the run
        tracking.check_reachable(uri)  # the store itself: MLflow's import and schema
        with tracking.record(cfg, name, tags, parent, continue_run_id=continued, kept=kept) as run_id:
            training = cfg.train.name == TrainName.accuracy
            if training:  # what a later train.resume=true, or SLURM's requeue, goes on from
                resume.remember(out, run_id, params)
            ranks = ranks_done()
            with tracking.failing_as_run():  # a fault of this process after the ranks is the run's failure
                summarize = results.summarize_training if training else results.summarize
                record = summarize(cfg, ranks, started, time.time())
                files = results.write_files(record, ranks, out, run_id, cfg)
                logs = sorted(str(log) for log in out.glob("rank*.log"))  # what the ranks printed: warnings
                result = upload.keep(kept, cfg, run_id, name, parent, params, {**tags, **record.tags}, record,
                                     [str(out / "resolved_config.yaml"), *files, *logs], started)  # before any is logged
            with tracking.logging_kept(uri, kept):  # a store that fails: one line naming the kept result
                upload.log(result, out, uri, run_id)
            if record.failure:  # logged with its proof, then the run fails: a figure counts only if it trained
                raise RunFailed(record.failure, kind=failure_kind(record.failure))
            for warning in trained.warnings(record.metrics, fixed_batch=pipelines.of(cfg).fixed_batch):
                log.warning(warning)
    return say_done(cfg, name, {"run_id": run_id, "arch": cfg.model.arch.value, **record.metrics}, out, parent)


def say_done(cfg: DictConfig, name: str, summary: dict, out: Path, parent: Optional[str]) -> dict:
    """The run's headline, and where its results are; the summary Hydra keeps as the job's return."""
    headline = results.training_headline if cfg.train.name == TrainName.accuracy else results.headline
    summary = described(cfg, summary)
    log.info("%s; MLflow run %s", headline(name, summary), summary["run_id"])
    if not parent:  # a sweep prints where its results are once, at its end
        uri = cfg.mlflow.tracking_uri
        print(tracking.ui_hint(uri, tracking.experiment_of(uri, summary["run_id"]), output_dir=str(out)))
    return summary


def described(cfg: DictConfig, summary: dict) -> dict:
    """A point's summary with what the sweep's line for it says (rn50/measure/meter.py point_line), from the
    config it ran: the CPU profile changes the config Hydra composed for it."""
    return {"arch": cfg.model.arch.value, "precision": cfg.precision.name, "batch_size": cfg.data.batch_size,
            "dist": schema.dist_name(cfg), "accelerator": cfg.dist.accelerator.value, **summary}


def finished_before(cfg: DictConfig, parent: str, config_hash: str, name: str, say: bool) -> Optional[dict]:
    """sweep.resume: the metrics of this point's FINISHED run in the sweep, or None to run it."""
    earlier = tracking.earlier_point(cfg.mlflow.tracking_uri, parent, config_hash)
    if tracking.done_before(earlier):
        if say:
            print(f"rn50: {name}: finished before as run {earlier.info.run_id}, not run again", file=sys.stderr)
        return {"run_id": earlier.info.run_id, **earlier.data.metrics}
    if say:
        status = earlier.info.status if earlier and earlier.info.status != "FINISHED" else "before runs proved they trained"
        print(f"rn50: {name}: " + (f"ran before as run {earlier.info.run_id} ({status}), running "
                                    "it again" if earlier else "a new point of this sweep"), file=sys.stderr)
    return None


def run_tags(cfg: DictConfig, out: Path) -> dict:
    commit = git_commit()
    overrides = HydraConfig.get().overrides.task
    return {
        "command": " ".join(["python -m rn50", *overrides]),
        "launch_host": socket.gethostname(),
        "output_dir": str(out),
        "dist": schema.dist_name(cfg),
        "cluster": cfg.cluster.name,
        tracking.HASH_TAG: schema.config_hash(cfg),  # finds a sweep point again (sweep.resume)
        **({"slurm_job_id": os.environ["SLURM_JOB_ID"]} if "SLURM_JOB_ID" in os.environ else {}),
        **({"git_commit": commit, "mlflow.source.git.commit": commit} if commit else {}),
    }


# The ways a launcher is told to stop: Ctrl-C, kill, a closed terminal (or an ended SSH session).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _interrupted(signum, frame):
    # The first stop signal stops the run; later ones (a closing terminal's shell sends SIGHUP to
    # its jobs, and the kernel sends another when the shell ends) must not cut short its closing.
    for other in STOP_SIGNALS:
        signal.signal(other, signal.SIG_IGN)
    raise Interrupted(signal.Signals(signum).name)


def say(line: str) -> None:
    """A last line on stderr, which a closed terminal no longer takes."""
    try:
        print(line, file=sys.stderr)
    except OSError:
        pass


def main() -> None:
    # Let errors reach `reported`, which prints one line, instead of Hydra's multi-line printer.
    os.environ["HYDRA_FULL_ERROR"] = "1"
    console.quiet()
    if "RANK" not in os.environ and "SLURM_STEP_ID" not in os.environ:  # not a rank torchrun or srun started
        for signum in STOP_SIGNALS:  # each closes the launcher's run as KILLED and stops its ranks
            signal.signal(signum, _interrupted)
    try:
        with reported():
            run()
    except BaseException as exc:
        if not (isinstance(exc, SystemExit) and exc.code in (0, None)):
            pool.close_all(kill=True)  # ranks started for a run that will not happen
        # A sweep stopped before its end (a job that does not compose, Ctrl-C) closes its parent run.
        parent = os.environ.pop(PARENT_ENV, None)
        if parent and not (isinstance(exc, SystemExit) and exc.code in (0, None)):
            tracking.close_failed(os.environ[URI_ENV], parent, killed=isinstance(exc, KeyboardInterrupt))
        if isinstance(exc, KeyboardInterrupt):
            what = getattr(exc, "signal_name", "SIGINT")
            note = getattr(exc, "note", "") or "no run was open"
            say(f"rn50: interrupted by {what}: {note}" + (f"; sweep {parent} marked KILLED" if parent else ""))
            sys.exit(128 + signal.Signals[what])
        if isinstance(exc, OSError) and exc.filename:  # Hydra's output directory, say, on a read-only disk
            say(f"rn50: error: cannot write {exc.filename}: {exc.strerror}; run from a writable "
                "directory or set hydra.run.dir=/a/writable/path")
            sys.exit(2)
        raise


if __name__ == "__main__":
    main()
