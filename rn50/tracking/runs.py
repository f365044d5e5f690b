"""MLflow runs as rn50 records them: the config as params, results with their series and files, a run
made, marked running again, ended, and found, and who owns a RUNNING run (owner_tags, close_orphans).
The run's lifecycle, with its failure policy and the stop signals held while a run is made, is the
launcher's (rn50/launcher/lifecycle.py)."""

import contextlib
import socket
import time
from typing import Dict, Iterable, List, Mapping, Optional, Sequence

from omegaconf import DictConfig, OmegaConf

from rn50.measure import host
from rn50.errors import ConfigError
from rn50.tracking.client import mlflow, open_client
from rn50.tracking.health import store_lock
from rn50.tracking.ui import ensure_ui_view

PARENT_TAG = "mlflow.parentRunId"


ROLE_TAG = "rn50.role"  # "sweep" on a multirun's parent run


HASH_TAG = "rn50.config_hash"


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


# Who owns a RUNNING run: the launcher that opened it, recorded in its tags (host, pid, start), so
# that a run whose launcher ended without closing it (SIGKILL, a crash, an out-of-memory kill) does not
# stay RUNNING for good. The next rn50 command on the same store closes such runs of its host as
# KILLED with failure=launcher_lost, and so does a rank that sees its launcher gone (rn50/rank/run.py).
# A run whose launcher ran on another host waits for a command there: this host cannot see that process.

# The owner's fields (rn50/measure/host.py) as tags: launch_host is its host.
TAGS = {"host": "launch_host", "pid": "launcher_pid", "started": "launcher_started", "boot": "launcher_boot",
        "pidns": "launcher_pidns"}
PID_TAG = TAGS["pid"]


def owner_tags() -> Dict[str, str]:
    """This process as the owner of the runs it opens."""
    return {TAGS[k]: v for k, v in host.this_process().items()}


def launcher(tags: Dict[str, str]) -> Dict[str, str]:
    """The owner a run's tags record."""
    return {k: tags.get(tag, "") for k, tag in TAGS.items()}


def close_orphans(uri: str) -> List[str]:
    """Close as KILLED, with failure=launcher_lost, every RUNNING run in the store whose launcher ran
    on this host and has ended; their ids."""
    client = open_client(uri)
    experiments = [e.experiment_id for e in client.search_experiments()]
    if not experiments:
        return []
    here = socket.gethostname().replace("'", "")
    runs = search_runs(client, experiments, f"attributes.status = 'RUNNING' and tags.launch_host = '{here}'")
    closed = []
    for run in runs:
        if PID_TAG not in run.data.tags or host.owner_alive(launcher(run.data.tags)) is not False:
            continue  # logged before owners were, alive, or this host cannot tell
        now = client.get_run(run.info.run_id)  # as it is now: a resume may have taken it on since the search
        if now.info.status != "RUNNING" or host.owner_alive(launcher(now.data.tags)) is not False:
            continue
        end_run(uri, run.info.run_id, ok=False, killed=True, tags={
            "failure": "launcher_lost",
            "error": f"its launcher ({host.describe_owner(launcher(now.data.tags))}) ended without closing it"})
        closed.append(run.info.run_id)
    return closed
