"""Nothing lost to the tracking store: a result kept on disk survives a store that fails and is
uploaded once; a store that cannot be written is refused before the ranks start; a fresh
store is made safely by runs that open it at once."""

import json
import multiprocessing
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT, TINY
from helpers.cli import rn50
from helpers.store import empty_store_in, runs_in
from rn50 import tracking
from rn50.launcher import lifecycle
from rn50.tracking import upload
from rn50.tracking.client import MlflowClient

pytestmark = pytest.mark.slow  # each runs python -m rn50, or ten processes at once


def test_a_result_survives_a_store_that_fails_and_is_uploaded_once(tmp_path, capsys, monkeypatch):
    # The store takes the run and its metrics, but its artifact store is a disk that is not
    # there (a dangling link, which even root cannot write through): logging fails at the end.
    empty_store_in(tmp_path)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    disk = tmp_path / "artifact-disk"
    (tmp_path / "artifacts").symlink_to(disk)
    MlflowClient(uri).create_experiment("rn50", artifact_location=str(tmp_path / "artifacts"))
    proc = rn50(tmp_path, *TINY)
    assert proc.returncode == 1, proc.stderr[-3000:]
    (run,) = runs_in(tmp_path)
    kept = Path(run.data.tags["output_dir"]) / "result.json"
    errors = [line for line in proc.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and errors[0].startswith(f"rn50: error: mlflow.tracking_uri={uri} failed while "
                                                     "logging the result ("), proc.stderr[-3000:]
    assert errors[0].endswith(f"; it is kept in {kept}: `python -m rn50.upload {kept}` logs it")
    assert run.info.status == "FAILED" and run.data.tags["failure"] == "logging"  # never FINISHED without it
    result = json.loads(kept.read_text())
    assert result["run_id"] == run.info.run_id and result["metrics"]["throughput/images_per_sec"] > 0
    assert {"resolved_config.yaml", "step_times.csv", "summary.json"} <= set(result["artifacts"])

    disk.mkdir()  # the disk is back: the result goes into the run it was meant for, once
    up = rn50(tmp_path, str(kept.parent), module="rn50.upload")
    assert up.returncode == 0 and up.stdout == f"{kept}: logged as run {run.info.run_id} in {uri}\n", up.stderr
    other = f"sqlite:///{tmp_path}/other.db"  # and into another store, once
    monkeypatch.setenv("RN50_VERBOSE", "1")  # main's console.quiet() leaves this process's loggers alone
    for args in ([str(kept.parent)], ["--tracking-uri", other, str(kept)], ["--tracking-uri", other, str(kept)]):
        upload.main(args)  # in this process: each `python -m rn50.upload` imports MLflow anew
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"{kept}: logged before, as run {run.info.run_id} in {uri}; not logged again"
    assert lines[1].startswith(f"{kept}: logged as run ") and lines[2].endswith("not logged again")
    for store in (uri, other):
        client = MlflowClient(store)
        (run,) = client.search_runs([client.get_experiment_by_name("rn50").experiment_id])
        assert run.info.status == "FINISHED" and "failure" not in run.data.tags
        assert all(run.data.metrics[k] == tracking.runs.shown(v) for k, v in result["metrics"].items())
        assert len(client.get_metric_history(run.info.run_id, "throughput/images_per_sec_window")) == 1
        assert run.info.end_time == result["end_time_ms"]
        assert run.info.start_time == result["start_time_ms"] or store == uri  # the run made before it ran
        assert {"resolved_config.yaml", "step_times.csv", "summary.json"} <= \
            {a.path for a in client.list_artifacts(run.info.run_id)}
        assert run.data.params["data.batch_size"] == "4"
    assert MlflowClient(uri).search_runs(["1"])[0].info.run_id == result["run_id"]  # the run it was meant for

    with pytest.raises(SystemExit) as exit:
        upload.main([str(tmp_path / "nosuch")])
    assert exit.value.code == 2 and capsys.readouterr().err.splitlines() == [
        f"rn50.upload: error: {tmp_path / 'nosuch'}: no result.json there; give a run's output directory "
        "(outputs/DATE/TIME), a sweep's (multirun/DATE/TIME) or a result.json"]


def permission_bound(command):
    """command as a user whom file permissions bind: as root, without CAP_DAC_OVERRIDE."""
    if os.geteuid() != 0:
        return command
    if not shutil.which("setpriv"):
        pytest.skip("root ignores file permissions, and setpriv (util-linux), which drops that, is missing")
    return ["setpriv", "--inh-caps=-dac_override", "--bounding-set=-dac_override", *command]


@pytest.mark.parametrize("read_only", ["folder", "file"])
def test_a_store_that_cannot_be_written_is_refused_before_the_ranks_start(tmp_path, read_only):
    # The user followed rn50's advice for a read-only working directory (hydra.run.dir), and
    # its ./mlflow.db, the default store, cannot be written either.
    here = tmp_path / "here"
    here.mkdir()
    empty_store_in(here)
    (here / "mlflow.db" if read_only == "file" else here).chmod(0o444 if read_only == "file" else 0o555)
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(permission_bound([sys.executable, "-m", "rn50", *TINY, f"hydra.run.dir={out}"]),
                          cwd=here, env=env, capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr[-3000:]
    unwritable = here / "mlflow.db" if read_only == "file" else here
    assert proc.stderr.splitlines() == [
        f"rn50: error: mlflow.tracking_uri=sqlite:///{here}/mlflow.db cannot be written: {unwritable}: "
        f"Permission denied; record into a writable folder, e.g. mlflow.tracking_uri=sqlite:///"
        f"{os.path.expanduser('~')}/mlflow.db"], proc.stderr[-3000:]
    assert not list(out.glob("rank*.log"))  # no rank ran
    assert not runs_in(here)
    # rn50.doctor asks the same question the same way (tracking.health.write_refused), with the same answer.
    doctor = subprocess.run(permission_bound([sys.executable, "-m", "rn50.doctor"]), cwd=here, env=env,
                            capture_output=True, text=True)
    assert doctor.returncode == 1
    (line,) = [line.split(None, 2) for line in doctor.stdout.splitlines() if " tracking " in line]
    assert line[:2] == ["FAIL", "tracking"] and line[2].startswith(
        f"sqlite:///{here}/mlflow.db: {unwritable} cannot be written (Permission denied); fix: "), line


def record_one(cfg, barrier, results):
    """What a launcher does with its store: check it, open a run, log, close it."""
    barrier.wait()
    uri = cfg.mlflow.tracking_uri
    try:
        tracking.health.check_reachable(uri)
        with lifecycle.record(cfg, "at once", {}) as run_id:
            tracking.runs.log_results(uri, run_id, {"throughput/images_per_sec": 1.0})
        results.put("ok")
    except BaseException as exc:
        results.put(f"{type(exc).__name__}: {exc}")


def test_ten_runs_at_once_make_a_fresh_store_safely(tmp_path, compose_cfg):
    # MLflow's tracking store makes a new database's schema unguarded: ten launchers opening
    # one fresh ./mlflow.db at once failed (duplicate column, half-made tables) but for one.
    import mlflow.store.tracking.sqlalchemy_store  # noqa: F401  imported once, not by each process

    fork = multiprocessing.get_context("fork")
    for attempt in range(3):
        db = tmp_path / str(attempt) / "mlflow.db"
        db.parent.mkdir()
        cfg = compose_cfg([f"mlflow.tracking_uri=sqlite:///{db}"])
        barrier, results = fork.Barrier(10), fork.Queue()
        processes = [fork.Process(target=record_one, args=(cfg, barrier, results)) for _ in range(10)]
        for p in processes:
            p.start()
        outcomes = [results.get() for _ in processes]
        for p in processes:
            p.join()
        assert outcomes == ["ok"] * 10, outcomes
        (experiment,) = [e for e in MlflowClient(f"sqlite:///{db}").search_experiments() if e.name == "rn50"]
        runs = MlflowClient(f"sqlite:///{db}").search_runs([experiment.experiment_id])
        assert [r.info.status for r in runs] == ["FINISHED"] * 10
        with sqlite3.connect(db) as con:
            tables = [name for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        assert not [t for t in tables if t.startswith("_alembic_tmp")], tables
