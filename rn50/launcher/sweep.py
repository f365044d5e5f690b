"""A Hydra multirun as one MLflow parent run, its jobs as children, and a report at the end.

Registered in conf/config.yaml under hydra.callbacks. Jobs find the parent
through the environment, which also reaches jobs a cluster launcher starts.
"""

import json
import logging
import os
import shlex
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from rn50 import STARTED
from rn50.config.messages import reported
from rn50.config.reads import nodes_gpus
from rn50.errors import ConfigError, Rn50Error
from rn50.launcher import pool
from rn50.launcher.stop import PARENT_ENV, URI_ENV
from rn50.launcher.launch import resolve_accelerator
from rn50.measure import meter
from rn50.options import clusters, profilers
from rn50.point import identity
from rn50.results import report
from rn50.results.collect import collect
from rn50.results.rows import tally
from rn50.results.scaling import scaling_metrics
from rn50 import tracking
from rn50.launcher import lifecycle

log = logging.getLogger("rn50")


def start_first_ranks(config: DictConfig) -> None:
    """When every point has one process count, start its ranks now, while the sweep's MLflow
    run is opened; the first point then finds them warm."""
    swept = {o.split("=")[0].lstrip("+~") for o in config.hydra.overrides.task if "," in o}
    cluster = clusters.of(config)  # the sweep's config, before any point's overrides: each point builds its own
    if cluster.rank_env is not None or profilers.of(config).starts_ranks or \
            any(key == "dist" or key.startswith("dist.") for key in swept):
        return
    try:
        device = resolve_accelerator(config, cluster, say=False).value  # each point says what it runs on
    except ConfigError:  # each point says so itself
        return
    pool.pool_for(config.dist.gpus_per_node, device)


class SweepCallback(Callback):
    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        if "TORCHELASTIC_RUN_ID" in os.environ:  # every rank would run the whole sweep
            with reported():
                raise ConfigError("--multirun under torchrun: run one point per torchrun, or sweep "
                                  "with cluster=slurm or cluster=local")
        if config.dry_run:
            return
        HydraConfig.instance().set_config(config)  # resolves ${hydra:...} in mlflow.tracking_uri
        self.total = identity.sweep_size(config.hydra.overrides.task, config.hydra.sweeper.get("params"))
        start_first_ranks(config)
        uri = config.mlflow.tracking_uri
        listed = [o for o in config.hydra.overrides.task if not o.startswith("sweep.resume=")]
        overrides = " ".join(listed)
        with reported():
            tracking.health.check_reachable(uri)
            tracking.runs.close_orphans(uri)  # runs of this host whose launcher ended without closing them
            if config.sweep.resume:
                parent = tracking.sweeps.find_sweep(uri, config.mlflow.experiment_name, config.sweep.resume, overrides)
        os.environ[URI_ENV] = uri
        if config.sweep.resume:
            before = tracking.runs.reopen(uri, parent, {"sweep.dir": str(Path(config.hydra.sweep.dir).resolve()),
                                                   **tracking.runs.owner_tags()})
            before = before.get("sweep.overrides", "")
            print(f"rn50: resuming sweep {parent}: points that finished with the same config are not run again",
                  file=sys.stderr)
            if before != overrides:
                print(f"rn50: that sweep ran '{before}', this one '{overrides}': its points that match are "
                      "resumed, the others join it as new points", file=sys.stderr)
            os.environ[PARENT_ENV] = parent
            return
        started = datetime.now(timezone.utc).isoformat(timespec="seconds")
        tags = {
            tracking.sweeps.SWEEP_ROLE[0]: tracking.sweeps.SWEEP_ROLE[1],
            "sweep.overrides": overrides,
            # the same as a JSON list: a value with a space in it stays one override (the report's NOT STARTED rows)
            "sweep.override_list": json.dumps(listed),
            "sweep.start_time": started,
            "sweep.dir": str(Path(config.hydra.sweep.dir).resolve()),
            "command": f"python -m rn50 --multirun {overrides}",
            **tracking.runs.owner_tags(),
        }
        os.environ[PARENT_ENV] = lifecycle.start_run(config, f"sweep {started}", tags, params=False)

    def on_job_end(self, config: DictConfig, job_return, **kwargs) -> None:
        """One line per finished point: [3/12] resnet50 amp 1n2g bs256: 11,798 images/sec."""
        if config.dry_run or not hasattr(self, "total"):
            return
        try:
            summary = dict(job_return.return_value or {})
        except Exception:  # the job raised: Hydra keeps the error as its return value
            summary = {}
        summary.setdefault("failure", "see the error above")
        # A point's own return says what it ran (the CPU profile changes the keys); one that failed
        # before returning is described by its config as composed.
        composed = dict(arch=config.model.arch.value, precision=config.precision.name, batch_size=config.data.batch_size,
                        dist=nodes_gpus(config.dist.nodes, config.dist.gpus_per_node))
        summary = {**composed, **summary}
        print(meter.point_line(config.hydra.job.num + 1, self.total, summary), file=sys.stderr)

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        pool.close_all(wait=False)  # the warm ranks leave while the report is made
        parent = os.environ.pop(PARENT_ENV, None)
        if parent is None:  # a dry run, or one point
            return
        uri, sweep_dir = config.mlflow.tracking_uri, Path(config.hydra.sweep.dir)
        try:
            rows = collect(uri, parent_run_id=parent)
            footer = report.time_line(rows, time.time() - STARTED, int(STARTED * 1000))  # this command's
            files = report.write(rows, sweep_dir, footer)
            for run_id, metrics in scaling_metrics(rows).items():  # the benchmark view's columns
                tracking.runs.log_results(uri, run_id, metrics)
            tracking.runs.log_results(uri, parent, {}, artifacts=map(str, files))
            tracking.ui.set_description(uri, parent, report.description(rows))
            failed = [r for r in rows if r["status"] != "FINISHED"]
            # FAILED where a point did not finish; the tag says how many did what
            tracking.runs.end_run(uri, parent, ok=not failed, tags={"sweep.points": tally(rows)})
        except Exception as exc:  # a store that failed: the points' results are kept in their output directories
            tracking.runs.close_failed(uri, parent)
            with reported():
                report_command = f"python -m rn50.report --parent-run-id {parent} --tracking-uri {shlex.quote(uri)}"
                raise Rn50Error(f"the sweep's report could not be made from mlflow.tracking_uri={uri} "
                                f"({tracking.client.first_line(exc)}); `python -m rn50.upload {sweep_dir}` logs the "
                                f"points' kept results, then `{report_command}` makes it") from None
        log.info("sweep report: %s", files[0])
        print(report.markdown(rows))
        print(footer)
        print(tracking.ui.ui_hint(uri, tracking.ui.experiment_of(uri, parent), output_dir=str(files[0].parent)))
        if failed:
            points = ", ".join(f"{r['point']} ({r['failure'] or r['status'].lower()})" for r in failed)
            print(f"rn50: error: {len(failed)} of {len(rows)} sweep points failed: {points}", file=sys.stderr)
            sys.exit(1)
