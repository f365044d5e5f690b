"""Everything rn50 writes to or reads from MLflow goes through here (the package rn50.tracking is
the only one that imports mlflow: rn50/tracking/client.py).

MLflow is imported on first use: answers that need no run (--help, --cfg, dry runs,
bad input) come back without paying for it.
"""

import contextlib
import fcntl
import json
import os
import shlex
import sqlite3
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Mapping, Optional, Sequence

from omegaconf import DictConfig, OmegaConf

from rn50 import stops
from rn50.errors import ConfigError, Requeued, Rn50Error, RunFailed, error_line
from rn50.measure.trained import PROOF_TAG

# MLflow's HTTP client retries for minutes by default; an unreachable server should fail fast.
os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")

PARENT_TAG = "mlflow.parentRunId"
SCHEMES = ("sqlite", "http", "https", "postgresql", "mysql", "mssql", "databricks", "file")


def mlflow():
    """MLflow's client API (rn50/tracking/client.py), imported on first use."""
    from rn50.tracking import client  # deferred: seconds that --help, --cfg, dry runs and bad input never pay

    return client


def open_client(uri: str):
    """An MlflowClient of the store at uri. Every client rn50 makes is made here, under this
    module's one retry policy (MLFLOW_HTTP_REQUEST_MAX_RETRIES, above)."""
    return mlflow().MlflowClient(uri)


def server_unreachable(uri: str) -> Optional[str]:
    """A server's /health probe, the one rn50 makes: None when it answers, else why not. One try
    of 10 s, so that a server that is down is said at once."""
    try:
        urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=10).read()
    except (urllib.error.URLError, OSError) as exc:
        return str(getattr(exc, "reason", exc))
    return None


def __getattr__(name: str):
    """MlflowClient and MlflowException, imported when a caller first asks for them."""
    if name in ("MlflowClient", "MlflowException"):
        return getattr(mlflow(), name)
    raise AttributeError(name)


def flatten(node, prefix: str = "") -> Dict[str, str]:
    """Dotted keys of a nested config: {'data.batch_size': '256', ...}."""
    if isinstance(node, dict):
        out: Dict[str, str] = {}
        for key, value in node.items():
            out.update(flatten(value, f"{prefix}{key}."))
        return out
    return {prefix[:-1]: str(node)}


def config_params(cfg: DictConfig) -> Dict[str, str]:
    """The config as MLflow params; without Hydra's own node, which the configs a launcher loads for
    each job hold (and cannot resolve there)."""
    mine = OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"])
    return flatten(OmegaConf.to_container(mine, resolve=True, enum_to_str=True))


def check_reachable(uri: str, open_store: bool = True, write: bool = True) -> None:
    """Fail before any work starts when the tracking store cannot be opened. open_store=False
    makes only the checks that need no MLflow import: the scheme, a server's /health, and that a
    sqlite store's folder (and file, where it exists) can be written. write=False: a reader."""
    scheme = uri.split("://")[0].split("+")[0] if "://" in uri else uri
    if scheme not in SCHEMES:
        raise ConfigError(f"mlflow.tracking_uri={uri}: unknown scheme {scheme!r}; use sqlite:///path/mlflow.db "
                          "or http://host:port of an MLflow server")
    db = sqlite_file(uri)
    if db is not None:
        check_sqlite(uri, db, write)
    if uri.startswith(("http://", "https://")):
        reason = server_unreachable(uri)
        if reason is not None:
            raise Rn50Error(
                f"mlflow.tracking_uri={uri} is unreachable ({reason}); start a server "
                "(launchers/mlflow_server.sh) or drop the key to use ./mlflow.db"
            ) from None
    if not open_store:
        return
    try:  # a server answers /health whatever the Host header, and refuses requests for a name it does not allow
        with store_lock(uri):  # the first process to open a new store makes its schema; the others wait
            if not schema_made(uri):
                open_client(uri).search_experiments(max_results=1)
        open_client(uri).search_experiments(max_results=1)
    except Exception as exc:  # MLflow and SQLAlchemy raise many types for a bad store
        first = first_line(exc)
        hint = (f"; start the server with --allowed-hosts naming {uri.split('://')[1].split('/')[0]} "
                "(launchers/mlflow_server.sh allows its --host and its machine's names)"
                if "Invalid Host header" in first else "")
        raise Rn50Error(f"mlflow.tracking_uri={uri} cannot be opened: {first}{hint}") from None


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def sqlite_file(uri: str) -> Optional[str]:
    """The database file of a sqlite:/// URI (relative to the working directory unless it
    starts with a fourth slash); None for any other store."""
    return uri.removeprefix("sqlite:///").split("?")[0] if uri.startswith("sqlite:///") else None


def check_sqlite(uri: str, db: str, write: bool) -> None:
    """A sqlite store's folder must exist and, for a writer, take new files (SQLite writes its
    journal beside the database, rn50 its lock), and the database must be writable where it
    exists. A real write, so that it answers as the kernel will: permissions, a read-only mount."""
    folder = os.path.dirname(db) or "."
    if not os.path.isdir(folder):
        raise Rn50Error(f"mlflow.tracking_uri={uri} cannot be opened: {folder} is not a directory")
    if not write:
        return
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise unwritable(uri, folder, exc) from None
    try:
        if os.path.exists(db):
            open(db, "r+b").close()
    except OSError as exc:
        raise unwritable(uri, db, exc) from None


def unwritable(uri: str, path: str, exc: OSError) -> Rn50Error:
    home = os.path.expanduser("~")
    somewhere = home if os.access(home, os.W_OK) else tempfile.gettempdir()
    return Rn50Error(f"mlflow.tracking_uri={uri} cannot be written: {path}: {exc.strerror}; record into a writable "
                     f"folder, e.g. mlflow.tracking_uri=sqlite:///{somewhere}/mlflow.db")


def schema_made(uri: str) -> bool:
    """Whether a sqlite store's schema has been made (MLflow's migrations record their revision);
    a quick read without MLflow, which takes seconds to check the schema. True for other stores."""
    db = sqlite_file(uri)
    if db is None:
        return True
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as con:
            return con.execute("SELECT count(*) FROM alembic_version").fetchone()[0] > 0
    except sqlite3.Error:  # no file yet, or no table
        return False


@contextlib.contextmanager
def store_lock(uri: str) -> Iterator[None]:
    """For the block, this process alone sets up a sqlite store: its schema, which MLflow makes
    when a process first opens a new store (two processes making it at once fail with duplicate
    columns and leave half-made tables), and the experiment and its UI view. An flock on
    mlflow.db.lock beside the database, released when the process ends; no lock for other
    stores, or where a reader cannot create the lock file."""
    db = sqlite_file(uri)
    try:
        fd = os.open(db + ".lock", os.O_RDONLY | os.O_CREAT, 0o666) if db else None
    except OSError:  # a read-only folder: a writer was refused by check_sqlite already
        fd = None
    try:
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        if fd is not None:
            os.close(fd)


def experiment_id(client, name: str) -> str:
    experiment = client.get_experiment_by_name(name)
    if experiment:
        return experiment.experiment_id
    try:
        return client.create_experiment(name)
    except Exception:  # another process made it first (a server store: no lock)
        experiment = client.get_experiment_by_name(name)
        if experiment is None:
            raise
        return experiment.experiment_id


def start_run(
    cfg: DictConfig,
    run_name: str,
    tags: Mapping[str, str],
    parent_run_id: Optional[str] = None,
    params: bool = True,
) -> str:
    """Create a RUNNING run, with the config as params unless params=False; returns its id. A stop
    signal waits until the run has its params (rn50/stops.py); then the run is closed as KILLED and
    the stop acts. Inside record(), record holds the stop and closes the run. A run whose params
    could not be logged is closed as FAILED: none is left RUNNING without them."""
    uri = cfg.mlflow.tracking_uri
    caught: List[int] = []
    with stops.held(caught):
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
        stops.raise_caught(caught)
    return run_id


def create_run(uri: str, experiment_name: str, run_name: str, tags: Mapping[str, str],
               start_time_ms: Optional[int] = None) -> str:
    """A RUNNING run in the experiment, made with its UI view where missing; returns its id."""
    client = open_client(uri)
    with store_lock(uri):  # a new store's experiment and view are made once
        experiment = experiment_id(client, experiment_name)
        ensure_ui_view(uri, experiment)  # what the UI link in ui_hint opens
    return client.create_run(experiment, start_time=start_time_ms, run_name=run_name, tags=dict(tags)).info.run_id


def log_params(client, run_id: str, params: Mapping[str, str], logged: Mapping[str, str] = {}) -> None:
    """The config as params, but for those already logged (a run made before its job started)."""
    batch = [mlflow().Param(k, v) for k, v in params.items() if k not in logged]
    for i in range(0, len(batch), 100):  # MLflow's batch limit
        client.log_batch(run_id, params=batch[i : i + 100])


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


def existing_run(client, run_id: str, missing: str):
    """The run, or ConfigError(missing) where the store has no such run."""
    try:
        return client.get_run(run_id)
    except Exception:  # MlflowException, or the store's own error for an unknown id
        raise ConfigError(missing) from None


def mark_running(client, run_id: str, tags: Mapping[str, str]) -> None:
    client.update_run(run_id, status="RUNNING")
    for key, value in tags.items():
        client.set_tag(run_id, key, value)


def search_runs(client, experiment_ids: List[str], filter_string: str = "") -> list:
    """Every run matching the filter, across result pages."""
    runs, token = [], None
    while True:
        page = client.search_runs(experiment_ids, filter_string, max_results=1000, page_token=token)
        runs += list(page)
        token = page.token
        if not token:
            return runs


# Six significant digits (6223.51 images/sec, 15.2848 % MFU) are finer than any rerun repeats.
SHOWN_DIGITS = 6


def shown(value: float) -> float:
    return float(f"{float(value):.{SHOWN_DIGITS}g}")


def log_results(
    uri: str,
    run_id: str,
    metrics: Mapping[str, float],
    tags: Mapping[str, str] = {},
    series: Mapping[str, Sequence[float]] = {},
    artifacts: Iterable[str] = (),
    timestamp_ms: Optional[int] = None,
) -> None:
    """Summary metrics at step 0, each series as steps 0..n-1 (or its own steps, for a series of
    (step, value) pairs: train=accuracy's epochs), tags and artifact files.

    Summary metrics are logged to SHOWN_DIGITS significant digits, since the UI's runs table
    prints every stored digit; the series (step times, NVML samples) keep theirs. Every metric
    gets timestamp_ms (default: now): MLflow keeps one of identical metrics, so logging a kept
    result again adds nothing.
    """
    client = open_client(uri)
    now = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    batch = [mlflow().Metric(k, shown(v), now, 0) for k, v in metrics.items()]
    for key, values in series.items():
        pairs = [v if isinstance(v, (tuple, list)) else (i, v) for i, v in enumerate(values)]
        batch += [mlflow().Metric(key, float(v), now, int(step)) for step, v in pairs]
    for i in range(0, len(batch), 1000):
        client.log_batch(run_id, metrics=batch[i : i + 1000])
    if tags:
        client.log_batch(run_id, tags=[mlflow().RunTag(k, str(v)) for k, v in tags.items()])
    for path in artifacts:
        client.log_artifact(run_id, path)


def end_run(uri: str, run_id: str, ok: bool, tags: Mapping[str, str] = {}, killed: bool = False,
            end_time_ms: Optional[int] = None) -> None:
    client = open_client(uri)
    for key, value in tags.items():
        client.set_tag(run_id, key, value)
    statuses = mlflow().RunStatus
    status = statuses.KILLED if killed else statuses.FINISHED if ok else statuses.FAILED
    client.set_terminated(run_id, statuses.to_string(status), end_time=end_time_ms)


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
    caught: List[int] = []  # a stop signal while the run is made waits for it to be whole (rn50/stops.py)
    try:
        with stops.held(caught):
            if continue_run_id:
                continue_run(uri, continue_run_id, tags)
                run_id = continue_run_id
                if cfg.mlflow.run_id and cfg.mlflow.run_id != run_id:  # made for this job, which goes on elsewhere
                    open_client(uri).delete_run(cfg.mlflow.run_id)
            elif cfg.mlflow.run_id:
                run_id = adopt(cfg, tags)
            else:
                run_id = start_run(cfg, run_name, tags, parent_run_id)
    except Rn50Error:
        stops.raise_caught(caught)  # a stop held while the store failed wins over the store's error
        raise
    except Exception as exc:  # a server that answers /health but refuses a write
        stops.raise_caught(caught)
        raise Rn50Error(f"mlflow.tracking_uri={uri} cannot record a run: {first_line(exc)}") from None
    try:
        stops.raise_caught(caught)  # in the block: the run it stops is closed as KILLED
        yield run_id
    except Requeued:  # SLURM starts the job again, and it goes on with this run
        open_client(uri).set_tag(run_id, "requeued", "true")
        raise
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM or SIGHUP to the launcher (Interrupted)
        closed = close_failed(uri, run_id, interrupted_tags(exc), killed=True)
        exc.note = f"run {run_id} marked KILLED" if closed else f"run {run_id} left open: the store failed"
        raise
    except BaseException as exc:
        close_failed(uri, run_id, failure_tags(exc), getattr(exc, "log", None))
        raise
    with logging_kept(uri, kept):
        end_run(uri, run_id, ok=True)


def close_failed(uri: str, run_id: str, tags: Mapping[str, str] = {}, log: Optional[str] = None,
                 killed: bool = False) -> bool:
    """Mark a run FAILED (or KILLED) with its failure's tags, and attach `log` (the failing rank's
    output) where the artifact store takes it; False where the store fails to close the run."""
    with contextlib.suppress(Exception):
        if log:
            open_client(uri).log_artifact(run_id, log)
    try:
        end_run(uri, run_id, ok=False, tags=tags, killed=killed)
        return True
    except Exception:
        return False


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


def interrupted_tags(exc: BaseException) -> Dict[str, str]:
    """A run a stop signal ended (KILLED): failure=interrupted, and the signal in `error`."""
    return {"failure": "interrupted", "error": f"interrupted by {getattr(exc, 'signal_name', 'SIGINT')}"}


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
    run_id = adopt(cfg, tags) if cfg.mlflow.run_id else start_run(cfg, run_name, tags, parent_run_id)
    end_run(cfg.mlflow.tracking_uri, run_id, ok=False, tags=failure_tags(exc))


ROLE_TAG = "rn50.role"  # "sweep" on a multirun's parent run
SWEEP_ROLE = (ROLE_TAG, "sweep")
HASH_TAG = "rn50.config_hash"


def find_sweep(uri: str, experiment: str, resume: str, overrides: str) -> str:
    """The parent run that sweep.resume names: the latest sweep with these overrides, or a run id."""
    client = open_client(uri)
    found = client.get_experiment_by_name(experiment)
    if str(resume).lower() in ("true", "yes", "1"):
        role = f"tags.`{SWEEP_ROLE[0]}` = '{SWEEP_ROLE[1]}'"
        runs = search_runs(client, [found.experiment_id], role) if found else []
        same = sorted((r for r in runs if r.data.tags.get("sweep.overrides") == overrides),
                      key=lambda r: r.info.start_time)
        if not same:
            raise ConfigError(f"sweep.resume=true: no sweep of experiment {experiment} ran the overrides "
                              f"'{overrides}'; give a sweep's run id (sweep.resume=RUN_ID) or drop sweep.resume")
        return same[-1].info.run_id
    try:
        run = client.get_run(resume)
    except mlflow().MlflowException:
        raise ConfigError(f"sweep.resume={resume}: no such run in {uri}; give a sweep's run id, "
                          "or sweep.resume=true for the latest sweep with these overrides") from None
    if found is None or run.info.experiment_id != found.experiment_id:
        theirs = client.get_experiment(run.info.experiment_id).name
        raise ConfigError(f"sweep.resume={resume} is a run of experiment {theirs}, not {experiment}; "
                          f"set mlflow.experiment_name={theirs} or resume a sweep of {experiment}")
    if run.data.tags.get(SWEEP_ROLE[0]) != SWEEP_ROLE[1]:
        raise ConfigError(f"sweep.resume={resume} is not a sweep's run (no tag {SWEEP_ROLE[0]}=sweep); "
                          "give the parent run of a --multirun")
    return resume


def reopen(uri: str, run_id: str, tags: Mapping[str, str]) -> Dict[str, str]:
    """Mark a sweep's parent RUNNING again with new `tags`; returns its tags from before."""
    client = open_client(uri)
    before = dict(client.get_run(run_id).data.tags)
    for key in ("failure", "error"):  # what the stop that ended it said: it goes on now
        if key in before:
            client.delete_tag(run_id, key)
    mark_running(client, run_id, tags)
    return before


def continue_run(uri: str, run_id: str, tags: Mapping[str, str]) -> None:
    """Mark a resumed run RUNNING again, without the failure its interruption left on it."""
    client = open_client(uri)
    before = existing_run(client, run_id, f"train.resume=true: the run to continue, {run_id}, is not in "
                                          f"mlflow.tracking_uri={uri}; use the store the first run was recorded in")
    for key in ("failure", "error"):
        if key in before.data.tags:
            client.delete_tag(run_id, key)
    mark_running(client, run_id, {**tags, "resumed": "true"})


def done_before(run) -> bool:
    """A sweep point that need not run again: FINISHED, and recorded by an rn50 that proves its
    runs trained. A point from before ran under the same hash, but its amp runs never trained."""
    return run is not None and run.info.status == "FINISHED" and PROOF_TAG in run.data.tags


def earlier_point(uri: str, parent_run_id: str, config_hash: str):
    """The latest child of the sweep with this config hash, or None."""
    client = open_client(uri)
    experiment = client.get_run(parent_run_id).info.experiment_id
    runs = search_runs(client, [experiment], f"tags.`{PARENT_TAG}` = '{parent_run_id}' and "
                                             f"tags.`{HASH_TAG}` = '{config_hash}'")
    return max(runs, key=lambda r: r.info.start_time) if runs else None


# --- The MLflow UI made for benchmarks (issue 16) ---
# MLflow 3 opens an experiment in its GenAI layout unless the URL (or the browser's last
# choice, kept in its local storage) says workflowType=machine_learning; no experiment tag
# changes that. A saved view (an experiment tag the UI's "Views" menu lists, opened by
# viewStateShareKey) picks the runs table's columns and its order. Ordering by anything but
# the start time lists child runs flat, so a sweep's points show without expanding its parent;
# by end time, newest first, each sweep's parent comes right before its points.
UI_VIEW_ID = "rn50-benchmarks"
UI_VIEW_TAG = "mlflow.sharedViewState." + UI_VIEW_ID
UI_COLUMNS = [
    "metrics.`throughput/images_per_sec`",
    "metrics.`throughput/images_per_sec_per_device`",
    "metrics.`gpu/utilization_pct`",
    "metrics.`mfu_pct`",
    "metrics.`energy/images_per_joule`",
    "metrics.`step_time/median_ms`",
    # Several devices: the gradients' all-reduce timed alone, and (logged at a sweep's end) how much
    # of it a step showed against the sweep's 1-device point (rn50/results/report.py).
    "metrics.`scaling/efficiency_pct`",
    "metrics.`comm/allreduce_ms`",
    "metrics.`comm/busbw_GBps`",
    "metrics.`comm/exposed_ms_per_step`",
    "tags.`comm_transport`",
    "metrics.`time/startup_s`",
    "metrics.`data/wait_pct`",
    "params.`dist.accelerator`",  # cpu or gpu, beside the GPU's model: a CPU figure says so
    "tags.`gpu_model`",
    "tags.`torch_version`",
]
DESCRIPTION_TAG = "mlflow.note.content"  # the run page's Description, rendered as Markdown
MLFLOW_UI_PORT = 5000  # `mlflow ui`'s own default


def ui_view_state() -> Dict:
    """The saved view's state, as MLflow 3.15+ stores it (column ids are the table's own)."""
    return {
        "selectedColumns": UI_COLUMNS,
        "columnOrder": ["attributes.`Run Name`", "runDateAndNestInfo", *UI_COLUMNS, "duration"],
        # Wide enough for the names: throughput/images_per_sec and ..._per_device differ at the end.
        "columnWidths": {"attributes.`Run Name`": 270,
                         **{c: 270 if "throughput/" in c else 170 for c in UI_COLUMNS}},
        "orderByKey": "attributes.`end_time`",
        "orderByAsc": False,
    }


def ensure_ui_view(tracking_uri: str, experiment_id: str) -> None:
    """Give the experiment the "rn50 benchmarks" saved view that ui_url opens; a no-op when it has it."""
    client = open_client(tracking_uri)
    state = json.dumps(ui_view_state(), sort_keys=True)
    current = client.get_experiment(experiment_id).tags.get(UI_VIEW_TAG)
    try:
        if current and json.loads(current).get("state") == state:
            return
    except ValueError:  # not ours, or damaged: write it again
        pass
    now = int(time.time() * 1000)
    envelope = {"name": "rn50 benchmarks", "createdAt": now, "updatedAt": now, "state": state}
    client.set_experiment_tag(experiment_id, UI_VIEW_TAG, json.dumps(envelope))


def _is_server(tracking_uri: str) -> bool:
    return tracking_uri.startswith(("http://", "https://"))


def ui_url(tracking_uri: str, experiment_id: str, host: str = "127.0.0.1", port: int = MLFLOW_UI_PORT) -> str:
    """The address of the experiment's training runs, with the benchmark columns: on the
    tracking server itself, or on `mlflow ui` at host:port for a local store."""
    base = tracking_uri.rstrip("/") if _is_server(tracking_uri) else f"http://{host}:{port}"
    return (f"{base}/#/experiments/{experiment_id}/runs"
            f"?workflowType=machine_learning&viewStateShareKey={UI_VIEW_ID}")


def ui_command(tracking_uri: str, host: str = "127.0.0.1", port: int = MLFLOW_UI_PORT,
               cwd: Optional[str] = None) -> Optional[str]:
    """The `mlflow ui` command that serves this store (None for a server: it has its own UI).
    Plain `mlflow ui` opens ./mlflow.db; any other store is named."""
    if _is_server(tracking_uri):
        return None
    words = ["mlflow", "ui"]
    db = tracking_uri.removeprefix("sqlite:///")
    here = Path(cwd or os.getcwd()).resolve() / "mlflow.db"
    if db == tracking_uri or Path(cwd or os.getcwd(), db).resolve() != here:
        words += ["--backend-store-uri", tracking_uri]
    if host != "127.0.0.1":
        words += ["--host", host]
    if port != MLFLOW_UI_PORT:
        words += ["--port", str(port)]
    return shlex.join(words)


def ui_hint(tracking_uri: str, experiment_id: str, host: str = "127.0.0.1", port: int = MLFLOW_UI_PORT,
            output_dir: Optional[str] = None, cwd: Optional[str] = None) -> str:
    """One console line: where the results are, how to see them, and the link that opens them."""
    where = f"results in {tracking_uri}" + (f" and {output_dir}" if output_dir else "")
    command = ui_command(tracking_uri, host, port, cwd)
    see = f"run `{command}` and open" if command else "open"
    return f"{where}; {see} {ui_url(tracking_uri, experiment_id, host, port)}"


def set_description(tracking_uri: str, run_id: str, markdown: str) -> None:
    """The run's Description in the MLflow UI (Markdown), cut to MLflow's tag limit."""
    open_client(tracking_uri).set_tag(run_id, DESCRIPTION_TAG, markdown[:mlflow().MAX_TAG_VAL_LENGTH])


def experiment_of(tracking_uri: str, run_id: str) -> str:
    return open_client(tracking_uri).get_run(run_id).info.experiment_id
