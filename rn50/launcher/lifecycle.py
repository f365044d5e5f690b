"""A run's lifecycle as the launcher owns it: made whole before a stop acts (rn50/launcher/stop.py holds
the signal), closed FINISHED, FAILED with its failure kind, or KILLED, and a point that could not run
recorded as a row. The MLflow calls themselves are rn50/tracking/runs.py's."""

import contextlib
from pathlib import Path
from typing import Dict, Iterator, List, Mapping, Optional

from omegaconf import DictConfig

from rn50.errors import ConfigError, Requeued, Rn50Error, RunFailed, error_line
from rn50.launcher import stop
from rn50.tracking.client import first_line, open_client
from rn50.tracking.runs import (PARENT_TAG, close_failed, config_params, continue_run, create_run, end_run,
                                existing_run, log_params, mark_running)

def start_run(
    cfg: DictConfig,
    run_name: str,
    tags: Mapping[str, str],
    parent_run_id: Optional[str] = None,
    params: bool = True,
) -> str:
    """Create a RUNNING run, with the config as params unless params=False; returns its id. A stop
    signal waits until the run has its params (rn50/launcher/stop.py); then the run is closed as KILLED and
    the stop acts. Inside record(), record holds the stop and closes the run. A run whose params
    could not be logged is closed as FAILED: none is left RUNNING without them."""
    uri = cfg.mlflow.tracking_uri
    caught: List[int] = []
    with stop.held(caught):
        run_id = create_run(uri, cfg.mlflow.experiment_name, run_name,
                            {**tags, **({PARENT_TAG: parent_run_id} if parent_run_id else {})})
        try:
            if params:
                log_params(open_client(uri), run_id, config_params(cfg))
        except BaseException as exc:
            interrupted = isinstance(exc, KeyboardInterrupt)  # a second Ctrl-C
            close_failed(uri, run_id, {} if interrupted else failure_tags(exc), killed=interrupted)
            raise
    if caught:
        close_failed(uri, run_id, killed=True)
        stop.raise_caught(caught)
    return run_id


def adopt(cfg: DictConfig, tags: Mapping[str, str]) -> str:
    """Record into the run made for this job before it started (mlflow.run_id): mark it RUNNING with
    this job's tags, and log the config as params (but for any a requeued job logged before)."""
    uri, run_id = cfg.mlflow.tracking_uri, cfg.mlflow.run_id
    client = open_client(uri)
    run = existing_run(client, run_id, f"mlflow.run_id={run_id} is not a run in mlflow.tracking_uri={uri}; "
                                       "leave mlflow.run_id unset and each job makes its own run")
    mark_running(client, run_id, tags)
    log_params(client, run_id, config_params(cfg), run.data.params)
    return run_id


def made_or_adopted(cfg: DictConfig, run_name: str, tags: Mapping[str, str], parent_run_id: Optional[str]) -> str:
    """The run a launcher records into: the one made for this job before it started (mlflow.run_id,
    adopt), else a new one (start_run)."""
    return adopt(cfg, tags) if cfg.mlflow.run_id else start_run(cfg, run_name, tags, parent_run_id)


@contextlib.contextmanager
def record(cfg: DictConfig, run_name: str, tags: Mapping[str, str], parent_run_id: Optional[str] = None,
           continue_run_id: Optional[str] = None, kept: Optional[Path] = None) -> Iterator[str]:
    """A run's one lifecycle: open it, yield its id, and close it by how the block ended.

    continue_run_id: a run to mark RUNNING again and go on with (train=accuracy's resume),
    instead of a new one; its params stay as they were logged. mlflow.run_id: a run made for
    this job before it started (cluster=slurm), which it records into. kept: where the block
    keeps the run's result on disk (rn50/tracking/upload.py), named when the store fails to close the run.

    FINISHED when the block returns; FAILED with `failure` (the RunFailed's kind, `config`
    for a config that cannot run, `stopped` for a rank that torchrun or srun stopped, else
    `error`) and a one-line `error` tag; KILLED on Ctrl-C, SIGTERM or SIGHUP to the launcher;
    still RUNNING, tagged requeued, when SLURM requeued its job (train=accuracy resumes it).
    A store that fails while a failed run is closed leaves it as it was: the block's own error
    is the one reported.
    """
    uri = cfg.mlflow.tracking_uri
    caught: List[int] = []  # a stop signal while the run is made waits for it to be whole (rn50/launcher/stop.py)
    try:
        with stop.held(caught):
            if continue_run_id:
                continue_run(uri, continue_run_id, tags)
                run_id = continue_run_id
                if cfg.mlflow.run_id and cfg.mlflow.run_id != run_id:  # made for this job, which goes on elsewhere
                    open_client(uri).delete_run(cfg.mlflow.run_id)
            else:
                run_id = made_or_adopted(cfg, run_name, tags, parent_run_id)
    except Rn50Error:
        stop.raise_caught(caught)  # a stop held while the store failed wins over the store's error
        raise
    except Exception as exc:  # a server that answers /health but refuses a write
        stop.raise_caught(caught)
        raise Rn50Error(f"mlflow.tracking_uri={uri} cannot record a run: {first_line(exc)}") from None
    try:
        stop.raise_caught(caught)  # in the block: the run it stops is closed as KILLED
        yield run_id
    except Requeued:  # SLURM starts the job again, and it goes on with this run
        open_client(uri).set_tag(run_id, "requeued", "true")
        raise
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM or SIGHUP to the launcher (Interrupted)
        closed = close_failed(uri, run_id, stop.interrupted_tags(exc), killed=True)
        exc.note = f"run {run_id} marked KILLED" if closed else f"run {run_id} left open: the store failed"
        raise
    except BaseException as exc:
        close_failed(uri, run_id, failure_tags(exc), getattr(exc, "log", None))
        raise
    with logging_kept(uri, kept):
        end_run(uri, run_id, ok=True)


@contextlib.contextmanager
def logging_kept(uri: str, kept: Optional[Path]) -> Iterator[None]:
    """A store that fails in the block (logging a run's kept result, or closing its run) is one
    line that names the kept result and the command that logs it later."""
    try:
        yield
    except Exception as exc:
        if kept is None or not kept.is_file():
            raise
        raise RunFailed(f"mlflow.tracking_uri={uri} failed while logging the result ({first_line(exc)}); it is "
                        f"kept in {kept}: `python -m rn50.upload {kept}` logs it", kind="logging") from exc


@contextlib.contextmanager
def failing_as_run() -> Iterator[None]:
    """An unexpected error here (MLflow refusing a metric, a bug) fails the run, with one line,
    instead of escaping as a traceback that would end a sweep without its report."""
    try:
        yield
    except Rn50Error:
        raise
    except Exception as exc:
        raise RunFailed(f"recording the results failed: {error_line(str(exc)) or type(exc).__name__}") from exc


def failure_tags(exc: BaseException) -> Dict[str, str]:
    if isinstance(exc, RunFailed):
        kind = exc.kind
    elif isinstance(exc, ConfigError):
        kind = "config"
    elif isinstance(exc, SystemExit):  # Lightning's SIGTERMException: torchrun or srun stopping every rank
        return {"failure": "stopped",
                "error": "stopped by SIGTERM: another rank failed, or the job was cancelled"}
    else:
        kind = "error"
    message = " ".join(str(exc).split()) or type(exc).__name__
    return {"failure": kind, "error": message[:500]}


def record_failure(cfg: DictConfig, run_name: str, tags: Mapping[str, str], parent_run_id: Optional[str],
                   exc: BaseException) -> None:
    """A run that failed before it began (a sweep point whose config cannot run): still a row. A
    run made for this job before it started (mlflow.run_id) is that row."""
    run_id = made_or_adopted(cfg, run_name, tags, parent_run_id)
    end_run(cfg.mlflow.tracking_uri, run_id, ok=False, tags=failure_tags(exc))
