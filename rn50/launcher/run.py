"""One run, as the launcher goes through it: check it, record it in MLflow, launch its ranks, and
summarize, keep and log what they measured (`benchmark`).

This process never imports torch or Lightning: the ranks do (rn50/rank/run.py), kept warm
between the points of a sweep (rn50/launcher/pool.py), and send their measurements back; this
process owns the MLflow run, so a run whose ranks crash, run out of memory or are
interrupted is still closed with the right status. In a --multirun each job is a
child of the sweep's run (rn50/launcher/sweep.py).
"""

import errno
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from rn50 import console
from rn50.config import reads
from rn50.config.schema import TrainName
from rn50.errors import ConfigError, RunFailed, failure_kind
from rn50.launcher import launch, slurm_jobs
from rn50.measure import trained
from rn50.options import clusters
from rn50.point import identity
from rn50.results import resume
from rn50.results import summary as results
from rn50.tracking import upload
from rn50 import tracking
from rn50.launcher import lifecycle

PROJECT_ROOT = Path(__file__).resolve().parents[2]  # the checkout, above rn50/launcher/
log = logging.getLogger("rn50")


def benchmark(cfg: DictConfig, parent: Optional[str], started: float, cluster=None) -> Optional[dict]:
    """cluster: the run's cluster option, where the caller built it (None: built here, where one that
    cannot be built raises its one-line ConfigError)."""
    out = Path(HydraConfig.get().runtime.output_dir)
    cluster = clusters.of(cfg) if cluster is None else cluster  # the run's; the other options are built with it, in the checks below
    cfg = launch.for_this_host(cfg, cluster)  # device=auto on a host without a GPU: the CPU profile
    if cfg.dry_run:
        print(launch.dry_run(cfg, HydraConfig.get().overrides.task, cluster))
        return None
    if cluster.submits():  # SLURM, from a login node: one job for the run, waited on here
        config_hash = identity.config_hash(cfg)  # as composed, as the job's run is tagged
        cfg = launch.preflight(cfg, here=False, cluster=cluster).cfg  # the job's run, as decided here
        submitted = slurm_jobs.submit_run(cfg, out, config_hash, sys.argv[1:], cluster)
        return say_done(cfg, reads.run_name(cfg), submitted, out, parent)
    rank = launch.process_rank(cfg, cluster)
    tags = run_tags(cfg, out)  # before the checks resolve dist.accelerator: the point's hash as composed
    try:
        # The run's options, built once for this process: a point whose option cannot be built is a row.
        flight = launch.preflight(cfg, cluster=cluster)
        cfg, options = flight.cfg, flight.options  # the run as decided here, read-only from now on
        params = tracking.runs.config_params(cfg)
        continued = resume.run_to_continue(cfg, out, params)  # train.resume, or a requeued SLURM job
        tracking.health.check_reachable(cfg.mlflow.tracking_uri, open_store=False)
    except ConfigError as exc:
        if (parent or cfg.mlflow.run_id) and rank == 0:  # a sweep point that cannot run is still a row
            lifecycle.record_failure(cfg, reads.run_name(cfg), tags, parent, exc)
        raise
    name = reads.run_name(cfg)  # with the accelerator decided: a run that fell back to the CPU says so
    # Every rank asks, so that all of a SLURM job's tasks skip together; a job whose run was made
    # before it was submitted (mlflow.run_id) was already asked about by its launcher.
    if parent and cfg.sweep.resume and not cfg.mlflow.run_id:
        done = finished_before(cfg, parent, tags[tracking.runs.HASH_TAG], name, say=rank == 0)
        if done is not None:
            return described(cfg, done)
    if rank != 0:  # a torchrun or SLURM rank other than 0: rank 0 records the run
        launch.run_rank_here(cfg, out, options)
        return None

    config_yaml = OmegaConf.to_yaml(cfg, resolve=True)
    (out / "resolved_config.yaml").write_text(config_yaml)
    uri, kept = cfg.mlflow.tracking_uri, upload.result_file(out)
    with launch.started(cfg, config_yaml, out, options) as ranks_done:  # the ranks start while MLflow opens the run
        tracking.health.check_reachable(uri)  # the store itself: MLflow's import and schema
        tracking.runs.close_orphans(uri)  # runs of this host whose launcher ended without closing them
        with lifecycle.record(cfg, name, tags, parent, continue_run_id=continued, kept=kept) as run_id:
            training = cfg.train.name == TrainName.accuracy
            if training:  # what a later train.resume=true, or SLURM's requeue, goes on from
                resume.remember(out, run_id, params)
            ranks = ranks_done()
            full = None  # a full disk under the output directory: the result goes to MLflow all the same
            with lifecycle.failing_as_run():  # a fault of this process after the ranks is the run's failure
                record = (results.summarize_training(cfg, ranks, started, time.time()) if training
                          else results.summarize(cfg, ranks, started, time.time(), options))
                what = (kept, cfg, run_id, name, parent, params, {**tags, **record.tags}, record)
                logs = sorted(str(log) for log in out.glob("rank*.log"))  # what the ranks printed: warnings
                try:
                    files = results.write_files(record, ranks, out, run_id, cfg)
                    result = upload.keep(*what, [str(out / "resolved_config.yaml"), *files, *logs], started)
                except OSError as exc:  # before any is logged
                    if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                        raise
                    full = results.remove_files(out)  # none of them half-written
                    console.drop_file_logs(out)  # its log there would fail at every line
                    result = upload.result_of(*what, [str(out / "resolved_config.yaml"), *logs], started)
                    result["tags"]["output_dir_error"] = f"no space left on device in {out}"
            try:
                with lifecycle.logging_kept(uri, None if full else kept):  # a store that fails: one line naming the kept result
                    upload.log(result, out, uri, run_id)
            except Exception as exc:
                if not full:
                    raise
                figure = record.metrics.get("throughput/images_per_sec")
                raise RunFailed(f"no space left on device in {out}, and mlflow.tracking_uri={uri} failed too "
                                f"({tracking.client.first_line(exc)}): the result is lost"
                                + (f"; it measured {figure:,.1f} images/sec" if figure else ""), kind="logging") from exc
            if full:
                log.warning("no space left on device in %s: the run's files there (%s) were not written; its figures "
                            "are in MLflow run %s. Free space there, or give the next run hydra.run.dir=/a/path/with/space",
                            out, ", ".join(full), run_id)
            if record.failure:  # logged with its proof, then the run fails: a figure counts only if it trained
                raise RunFailed(record.failure, kind=failure_kind(record.failure))
            for warning in trained.warnings(record.metrics, fixed_batch=options.data.fixed_batch):
                log.warning(warning)
    contention = {"contention": record.tags["contention"]} if "contention" in record.tags else {}
    return say_done(cfg, name, {"run_id": run_id, "arch": cfg.model.arch.value, **record.metrics, **contention}, out,
                    parent)


def say_done(cfg: DictConfig, name: str, summary: dict, out: Path, parent: Optional[str]) -> dict:
    """The run's headline, and where its results are; the summary Hydra keeps as the job's return."""
    headline = results.training_headline if cfg.train.name == TrainName.accuracy else results.headline
    summary = described(cfg, summary)
    log.info("%s; MLflow run %s", headline(name, summary), summary["run_id"])
    if not parent:  # a sweep prints where its results are once, at its end
        uri = cfg.mlflow.tracking_uri
        print(tracking.ui.ui_hint(uri, tracking.ui.experiment_of(uri, summary["run_id"]), output_dir=str(out)))
    return summary


def described(cfg: DictConfig, summary: dict) -> dict:
    """A point's summary with what the sweep's line for it says (rn50/measure/meter.py point_line), from the
    config it ran: the CPU profile changes the config Hydra composed for it."""
    return {"arch": cfg.model.arch.value, "precision": cfg.precision.name, "batch_size": cfg.data.batch_size,
            "dist": reads.dist_name(cfg), "accelerator": cfg.dist.accelerator.value, **summary}


def finished_before(cfg: DictConfig, parent: str, config_hash: str, name: str, say: bool) -> Optional[dict]:
    """sweep.resume: the metrics of this point's FINISHED run in the sweep, or None to run it."""
    earlier = tracking.sweeps.earlier_point(cfg.mlflow.tracking_uri, parent, config_hash)
    if tracking.sweeps.done_before(earlier):
        if say:
            print(f"rn50: {name}: finished before as run {earlier.info.run_id}, not run again", file=sys.stderr)
        return {"run_id": earlier.info.run_id, **earlier.data.metrics}
    if say:
        status = earlier.info.status if earlier and earlier.info.status != "FINISHED" else "before runs proved they trained"
        print(f"rn50: {name}: " + (f"ran before as run {earlier.info.run_id} ({status}), running "
                                    "it again" if earlier else "a new point of this sweep"), file=sys.stderr)
    return None


def git_commit() -> Optional[str]:
    """The commit of rn50's checkout, where it runs from one."""
    try:
        out = subprocess.run(["git", "-C", str(PROJECT_ROOT), "rev-parse", "HEAD"],
                             capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def run_tags(cfg: DictConfig, out: Path) -> dict:
    commit = git_commit()
    overrides = HydraConfig.get().overrides.task
    return {
        "command": " ".join(["python -m rn50", *overrides]),
        **tracking.runs.owner_tags(),  # launch_host and this process: a run it leaves open is closed later
        "output_dir": str(out),
        "dist": reads.dist_name(cfg),
        "cluster": cfg.cluster.name,
        tracking.runs.HASH_TAG: identity.config_hash(cfg),  # finds a sweep point again (sweep.resume)
        **({"slurm_job_id": os.environ["SLURM_JOB_ID"]} if "SLURM_JOB_ID" in os.environ else {}),
        **({"git_commit": commit, "mlflow.source.git.commit": commit} if commit else {}),
    }
