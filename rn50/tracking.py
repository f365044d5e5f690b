"""Everything rn50 writes to or reads from MLflow goes through here.

MLflow is imported on first use: answers that need no run (--help, --cfg, dry runs,
bad input) come back without paying for it.
"""

import contextlib
import os
import time
import urllib.error
import urllib.request
from typing import Dict, Iterable, Iterator, List, Mapping, Optional, Sequence

from omegaconf import DictConfig, OmegaConf

from rn50.errors import ConfigError, Interrupted, Rn50Error, RunFailed

# MLflow's HTTP client retries for minutes by default; an unreachable server should fail fast.
os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")

PARENT_TAG = "mlflow.parentRunId"
SCHEMES = ("sqlite", "http", "https", "postgresql", "mysql", "mssql", "databricks", "file")


def __getattr__(name: str):
    """MlflowClient and MlflowException, imported when a caller first asks for them."""
    if name == "MlflowClient":
        from mlflow.tracking import MlflowClient

        return MlflowClient
    if name == "MlflowException":
        from mlflow.exceptions import MlflowException

        return MlflowException
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
    return flatten(OmegaConf.to_container(cfg, resolve=True, enum_to_str=True))


def check_reachable(uri: str) -> None:
    """Fail before any work starts when the tracking store cannot be opened."""
    scheme = uri.split("://")[0].split("+")[0] if "://" in uri else uri
    if scheme not in SCHEMES:
        raise ConfigError(f"mlflow.tracking_uri={uri}: unknown scheme {scheme!r}; use sqlite:///path/mlflow.db "
                          "or http://host:port of an MLflow server")
    if uri.startswith(("http://", "https://")):
        try:
            urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=10).read()
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise Rn50Error(
                f"mlflow.tracking_uri={uri} is unreachable ({reason}); start a server "
                "(launchers/mlflow_server.sh) or drop the key to use ./mlflow.db"
            ) from None
        return
    from mlflow.tracking import MlflowClient

    try:
        MlflowClient(uri).search_experiments(max_results=1)
    except Exception as exc:  # MLflow and SQLAlchemy raise many types for a bad store
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise Rn50Error(f"mlflow.tracking_uri={uri} cannot be opened: {first}") from None


def experiment_id(client, name: str) -> str:
    experiment = client.get_experiment_by_name(name)
    return experiment.experiment_id if experiment else client.create_experiment(name)


def start_run(
    cfg: DictConfig,
    run_name: str,
    tags: Mapping[str, str],
    parent_run_id: Optional[str] = None,
    params: bool = True,
) -> str:
    """Create a RUNNING run, with the config as params unless params=False; returns its id."""
    from mlflow.entities import Param
    from mlflow.tracking import MlflowClient

    client = MlflowClient(cfg.mlflow.tracking_uri)
    all_tags = dict(tags)
    if parent_run_id:
        all_tags[PARENT_TAG] = parent_run_id
    run = client.create_run(
        experiment_id(client, cfg.mlflow.experiment_name), run_name=run_name, tags=all_tags
    )
    batch = [Param(k, v) for k, v in config_params(cfg).items()] if params else []
    for i in range(0, len(batch), 100):  # MLflow's batch limit
        client.log_batch(run.info.run_id, params=batch[i : i + 100])
    return run.info.run_id


def search_runs(client, experiment_ids: List[str], filter_string: str = "") -> list:
    """Every run matching the filter, across result pages."""
    runs, token = [], None
    while True:
        page = client.search_runs(experiment_ids, filter_string, max_results=1000, page_token=token)
        runs += list(page)
        token = page.token
        if not token:
            return runs


def runs_with_tag(uri: str, experiment: str, key: str, value: str) -> list:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    found = client.get_experiment_by_name(experiment)
    return search_runs(client, [found.experiment_id], f"tags.{key} = '{value}'") if found else []


def log_results(
    uri: str,
    run_id: str,
    metrics: Mapping[str, float],
    tags: Mapping[str, str] = {},
    series: Mapping[str, Sequence[float]] = {},
    artifacts: Iterable[str] = (),
) -> None:
    """Summary metrics at step 0, each series as steps 0..n-1, tags and artifact files."""
    from mlflow.entities import Metric, RunTag
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    now = int(time.time() * 1000)
    batch = [Metric(k, float(v), now, 0) for k, v in metrics.items()]
    for key, values in series.items():
        batch += [Metric(key, float(v), now, i) for i, v in enumerate(values)]
    for i in range(0, len(batch), 1000):
        client.log_batch(run_id, metrics=batch[i : i + 1000])
    if tags:
        client.log_batch(run_id, tags=[RunTag(k, str(v)) for k, v in tags.items()])
    for path in artifacts:
        client.log_artifact(run_id, path)


def end_run(uri: str, run_id: str, ok: bool, tags: Mapping[str, str] = {}, killed: bool = False) -> None:
    from mlflow.entities import RunStatus
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    for key, value in tags.items():
        client.set_tag(run_id, key, value)
    status = RunStatus.KILLED if killed else RunStatus.FINISHED if ok else RunStatus.FAILED
    client.set_terminated(run_id, RunStatus.to_string(status))


@contextlib.contextmanager
def record(cfg: DictConfig, run_name: str, tags: Mapping[str, str],
           parent_run_id: Optional[str] = None) -> Iterator[str]:
    """A run's one lifecycle: open it, yield its id, and close it by how the block ended.

    FINISHED when the block returns; FAILED with `failure` (the RunFailed's kind, `config`
    for a config that cannot run, `stopped` for a rank that torchrun or srun stopped, else
    `error`) and a one-line `error` tag; KILLED on Ctrl-C or SIGTERM to the launcher.
    """
    uri = cfg.mlflow.tracking_uri
    run_id = start_run(cfg, run_name, tags, parent_run_id)
    try:
        yield run_id
    except Interrupted as exc:
        end_run(uri, run_id, ok=False, killed=True)
        exc.note = f"run {run_id} marked KILLED"
        raise
    except BaseException as exc:
        end_run(uri, run_id, ok=False, tags=failure_tags(exc))
        raise
    end_run(uri, run_id, ok=True)


def failure_tags(exc: BaseException) -> Dict[str, str]:
    if isinstance(exc, RunFailed):
        kind = exc.kind
    elif isinstance(exc, ConfigError):
        kind = "config"
    elif isinstance(exc, SystemExit):  # Lightning's SIGTERMException: torchrun or srun stopping every rank
        return {"failure": "stopped",
                "error": "stopped by SIGTERM: another rank failed, or the job was cancelled"}
    elif isinstance(exc, KeyboardInterrupt):
        return {"failure": "stopped", "error": "interrupted"}
    else:
        kind = "error"
    message = " ".join(str(exc).split()) or type(exc).__name__
    return {"failure": kind, "error": message[:500]}


def record_failure(cfg: DictConfig, run_name: str, tags: Mapping[str, str], parent_run_id: Optional[str],
                   exc: BaseException) -> None:
    """A run that failed before it began (a sweep point whose config cannot run): still a row."""
    run_id = start_run(cfg, run_name, tags, parent_run_id)
    end_run(cfg.mlflow.tracking_uri, run_id, ok=False, tags=failure_tags(exc))


SWEEP_ROLE = ("rn50.role", "sweep")
HASH_TAG = "rn50.config_hash"


def find_sweep(uri: str, experiment: str, resume: str, overrides: str) -> str:
    """The parent run that sweep.resume names: the latest sweep with these overrides, or a run id."""
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
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
    except MlflowException:
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
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    before = dict(client.get_run(run_id).data.tags)
    client.update_run(run_id, status="RUNNING")
    for key, value in tags.items():
        client.set_tag(run_id, key, value)
    return before


def earlier_point(uri: str, parent_run_id: str, config_hash: str):
    """The latest child of the sweep with this config hash, or None."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    experiment = client.get_run(parent_run_id).info.experiment_id
    runs = search_runs(client, [experiment], f"tags.`{PARENT_TAG}` = '{parent_run_id}' and "
                                             f"tags.`{HASH_TAG}` = '{config_hash}'")
    return max(runs, key=lambda r: r.info.start_time) if runs else None
