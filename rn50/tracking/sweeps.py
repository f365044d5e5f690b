"""A sweep's runs in MLflow: the parent that sweep.resume names, and a point it ran before."""

from rn50.errors import ConfigError
from rn50.measure.trained import PROOF_TAG
from rn50.tracking.client import mlflow, open_client
from rn50.tracking.runs import HASH_TAG, PARENT_TAG, ROLE_TAG, search_runs

SWEEP_ROLE = (ROLE_TAG, "sweep")


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
