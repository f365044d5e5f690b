"""A sweep's rows read from MLflow alone: one per run (rn50/results/rows.py), the point of several
devices against its 1-device reference (rn50/results/scaling.py), each real-data point against its
synthetic one, and a row for each point of a sweep that never started."""

import json
from typing import Dict, List, Optional, Tuple

from rn50 import tracking
from rn50.errors import Rn50Error
from rn50.point.identity import sweep_points
from rn50.results.rows import COLUMNS, NOT_STARTED, ROLE_TAG, add_vs_synthetic, row
from rn50.results.scaling import add_scaling


def collect(uri: str, parent_run_id: Optional[str] = None, experiment: Optional[str] = None,
            filter_string: str = "") -> List[Dict]:
    """One row per benchmark run: the children of a sweep, or an experiment's runs."""
    try:
        return _collect(tracking.client.open_client(uri), uri, parent_run_id, experiment, filter_string)
    except tracking.client.MlflowException as exc:
        which = f"--parent-run-id {parent_run_id}" if parent_run_id else f"--filter {filter_string!r}"
        raise Rn50Error(f"{which}: {str(exc).splitlines()[0]}") from None


def _collect(client, uri, parent_run_id, experiment, filter_string) -> List[Dict]:
    filter_string_given = bool(filter_string)  # the points a filter leaves out are not "not started"
    if parent_run_id:
        exp_ids = [client.get_run(parent_run_id).info.experiment_id]
        clause = f"tags.`{tracking.runs.PARENT_TAG}` = '{parent_run_id}'"
        filter_string = f"{clause} and {filter_string}" if filter_string else clause
    else:
        found = client.get_experiment_by_name(experiment or "rn50")
        if found is None:
            raise Rn50Error(f"no MLflow experiment named {experiment!r} in {uri}")
        exp_ids = [found.experiment_id]
    runs = tracking.runs.search_runs(client, exp_ids, filter_string)
    children = [r for r in runs if r.data.tags.get(ROLE_TAG) != "sweep"]
    rows = [row(r) for r in children]
    for r in rows:
        if r["training"]:
            r["top1_curve"] = top1_curve(client, r["run_id"])
    if parent_run_id:
        rows = latest_per_point(rows)
    rows.sort(key=lambda r: (r["model"], r["precision"] or "", r["batch_per_gpu"], r["gpus"], r["start_time"]))
    rows = add_vs_synthetic(add_scaling(rows))
    if parent_run_id and not filter_string_given:  # the sweep's points that have no run, in its order
        kinds = {r["accelerator"] for r in rows}
        rows += not_started(client.get_run(parent_run_id).data.tags, children, kinds.pop() if len(kinds) == 1 else "cuda")
    return rows


def not_started(sweep_tags: Dict[str, str], children: list, accelerator: str) -> List[Dict]:
    """A row for each job of the sweep (its `sweep.override_list` tag, or `sweep.overrides` of a sweep
    logged before it) that no child run was made for (a sweep stopped before it, its launcher gone),
    named in its model cell by the keys the sweep varies; no figures. None where the overrides do not
    parse again."""
    listed = sweep_tags.get("sweep.override_list")
    overrides = json.loads(listed) if listed else sweep_tags.get("sweep.overrides", "").split()
    try:
        jobs = sweep_points(overrides) if overrides else []
    except Exception:  # Hydra's OverrideParseException: a value it cannot read back
        return []
    # A run is a job's when its command holds all of the job's overrides: a resumed sweep's jobs add
    # sweep.resume, a SLURM sweep's add mlflow.run_id.
    made = [f" {r.data.tags.get('command', '')} " for r in children]
    varied = [i for i in range(len(jobs[0]) if jobs else 0) if len({job[i] for job in jobs}) > 1]
    rows = []
    for job in jobs:
        if any(all(f" {o} " in command for o in job) for command in made):
            continue
        name = " ".join(job[i] for i in varied) or " ".join(job)
        rows.append({**{k: None for k, _ in COLUMNS}, "model": f"not started: {name}", "point": " ".join(job),
                     "status": NOT_STARTED, "failure": "", "error": "", "run_id": "", "accelerator": accelerator,
                     "profiled": False, "training": False, "start_time": 0})
    return rows


def top1_curve(client, run_id: str) -> List[Tuple[float, float]]:
    """(training seconds so far, val top-1 %) at each evaluated epoch of a train=accuracy run."""
    elapsed = {m.step: m.value for m in client.get_metric_history(run_id, "time/elapsed_s")}
    return sorted((elapsed[m.step], 100 * m.value) for m in client.get_metric_history(run_id, "val/top1")
                  if m.step in elapsed)


def latest_per_point(rows: List[Dict]) -> List[Dict]:
    """In a sweep, a point run again (resuming re-runs failed points) is its latest run."""
    latest: Dict[str, Dict] = {}
    for r in rows:
        if r["config_hash"] and (r["config_hash"] not in latest
                                 or r["start_time"] > latest[r["config_hash"]]["start_time"]):
            latest[r["config_hash"]] = r
    return [r for r in rows if not r["config_hash"] or latest[r["config_hash"]] is r]
