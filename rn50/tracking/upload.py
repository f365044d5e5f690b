"""A run's result kept on disk, and `python -m rn50.upload PATH...`, which logs kept results later.

Before a run logs anything, it writes result.json into its output directory: the params,
tags, metrics, series and artifact files that MLflow gets, and the store and run they are
meant for; the run then logs what the file holds. A store that fails meanwhile loses no
benchmark: the run says so in one line, and `python -m rn50.upload outputs/DATE/TIME` logs
the result once the store works again (or `--tracking-uri` another store). It goes into the
run it was meant for, where that run is in the store, else into a new run of the same name,
experiment, start time and sweep (where the sweep's run is there too). A result already
logged is not logged again: every logged result carries its id as the tag rn50.result_id.
"""

import argparse
import json
import os
import time
import uuid
from pathlib import Path
from typing import Iterable, List, Mapping, Optional

from rn50 import console
from rn50.config.messages import reported
from rn50.errors import Rn50Error, failure_kind
from rn50 import tracking

RESULT_FILE = "result.json"
RESULT_TAG = "rn50.result_id"


def result_file(out: Path) -> Path:
    """Where a run keeps its result: result.json in its output directory."""
    return Path(out) / RESULT_FILE


def keep(path: Path, cfg, run_id: str, run_name: str, parent_run_id: Optional[str], params: Mapping[str, str],
         tags: Mapping[str, str], record, artifacts: Iterable[str], started: float) -> dict:
    """Write the run's result (`result_of`'s) to `path` and return it. Atomically: a reader never sees
    half a file, and a write that fails (a full disk) leaves no part of one."""
    result = result_of(path, cfg, run_id, run_name, parent_run_id, params, tags, record, artifacts, started)
    partial = path.with_suffix(".partial")
    try:
        partial.write_text(json.dumps(result, indent=1) + "\n")
        os.replace(partial, path)
    except OSError:
        partial.unlink(missing_ok=True)
        raise
    return result


def result_of(path: Path, cfg, run_id: str, run_name: str, parent_run_id: Optional[str], params: Mapping[str, str],
              tags: Mapping[str, str], record, artifacts: Iterable[str], started: float) -> dict:
    """The run's result as `keep` writes it to `path`. record: the run's RunRecord (rn50/results/summary.py);
    artifacts: files to log, kept relative to path's folder where they lie in it, so that the output
    directory can move before an upload."""
    folder = path.parent.resolve()
    files = [Path(a).resolve() for a in artifacts]
    result = {
        "id": uuid.uuid4().hex,
        "tracking_uri": cfg.mlflow.tracking_uri,
        "experiment": cfg.mlflow.experiment_name,
        "run_id": run_id,
        "run_name": run_name,
        "parent_run_id": parent_run_id,
        "start_time_ms": int(started * 1000),
        "end_time_ms": int(time.time() * 1000),
        "params": dict(params),
        "tags": {k: str(v) for k, v in tags.items()},
        "metrics": dict(record.metrics),
        "series": {k: list(v) for k, v in record.series.items()},
        "artifacts": [str(f.relative_to(folder)) if f.is_relative_to(folder) else str(f) for f in files],
        "failure": record.failure,  # a run that did not train (rn50/measure/trained.py) stays FAILED when uploaded
    }
    return result


def log(result: Mapping, folder: Path, uri: str, run_id: str) -> None:
    """Log a kept result's metrics, series, tags (with its id) and artifacts into run_id."""
    tracking.runs.log_results(uri, run_id, result["metrics"], {**result["tags"], RESULT_TAG: result["id"]},
                         result["series"], [str(Path(folder, a)) for a in result["artifacts"]],
                         timestamp_ms=result["end_time_ms"])


def read(path: Path) -> dict:
    try:
        result = json.loads(path.read_text())
        missing = [a for a in result["artifacts"] if not Path(path.parent, a).is_file()]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise Rn50Error(f"{path}: not a result rn50 kept ({exc}); give a run's output directory or its "
                        f"{RESULT_FILE}") from None
    if missing:
        raise Rn50Error(f"{path}: its file {missing[0]} is missing; a result's files stay beside its {RESULT_FILE}")
    return result


def existing(client, run_id: Optional[str]):
    """The run, or None where the store has no such run (or it was deleted)."""
    try:
        run = client.get_run(run_id) if run_id else None
    except Exception:  # MlflowException: another store, which does not have the run
        return None
    return run if run is not None and run.info.lifecycle_stage != "deleted" else None


def logged_run(client, result: Mapping):
    """The run this result is logged in, or was meant for, in the client's store; None if neither is there."""
    run = existing(client, result["run_id"])
    if run is not None:
        return run
    experiment = client.get_experiment_by_name(result["experiment"])
    runs = tracking.runs.search_runs(client, [experiment.experiment_id],
                                f"tags.`{RESULT_TAG}` = '{result['id']}'") if experiment else []
    return max(runs, key=lambda r: r.info.start_time) if runs else None


def upload(path: Path, uri: Optional[str] = None) -> str:
    """Log the result kept in `path` into `uri` (default: the store it was meant for) and close
    its run FINISHED (FAILED for a run that did not train); returns the line that says what was done."""
    result = read(path)
    uri = uri or result["tracking_uri"]
    tracking.health.check_reachable(uri)
    client = tracking.client.open_client(uri)
    run = logged_run(client, result)
    failure = result.get("failure")
    closed = "FAILED" if failure else "FINISHED"
    if run is not None and run.info.status == closed and run.data.tags.get(RESULT_TAG) == result["id"]:
        return f"{path}: logged before, as run {run.info.run_id} in {uri}; not logged again"
    if run is None:
        parent = result["parent_run_id"]
        sweep = {tracking.runs.PARENT_TAG: parent} if existing(client, parent) else {}
        run_id = tracking.runs.create_run(uri, result["experiment"], result["run_name"], sweep, result["start_time_ms"])
        params = {}
    else:  # the run it was meant for (FAILED when the store failed), or an upload that stopped halfway
        run_id, params = run.info.run_id, run.data.params
        for key in ("failure", "error"):
            if key in run.data.tags:
                client.delete_tag(run_id, key)
    tracking.runs.log_params(client, run_id, result["params"], params)
    log(result, path.parent, uri, run_id)
    tags = {"failure": failure_kind(failure), "error": failure} if failure else {}
    tracking.runs.end_run(uri, run_id, ok=not failure, tags=tags, end_time_ms=result["end_time_ms"])
    return f"{path}: logged as run {run_id} in {uri}"


def kept_results(paths: Iterable[str]) -> List[Path]:
    """Each path's result.json: the file itself, or every one under a folder (a run's output
    directory, or a sweep's)."""
    found = []
    for name in paths:
        path = Path(name)
        here = [path] if path.is_file() else sorted(path.rglob(RESULT_FILE)) if path.is_dir() else []
        if not here:
            raise Rn50Error(f"{name}: no {RESULT_FILE} there; give a run's output directory (outputs/DATE/TIME), "
                            f"a sweep's (multirun/DATE/TIME) or a {RESULT_FILE}")
        found += here
    return found


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m rn50.upload", description=__doc__.split("\n")[0])
    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help=f"a run's output directory, a sweep's, or a {RESULT_FILE}")
    parser.add_argument("--tracking-uri", help="the store to log into; default: the one each result was meant for")
    args = parser.parse_args(argv)
    console.quiet()  # MLflow making a new store says so at INFO
    with reported("rn50.upload"):
        for path in kept_results(args.paths):
            try:
                print(upload(path, args.tracking_uri))
            except Rn50Error:
                raise
            except Exception as exc:  # the store's own error, as one line
                raise Rn50Error(f"{path}: logging it failed: {tracking.client.first_line(exc)}") from None


if __name__ == "__main__":
    main()
