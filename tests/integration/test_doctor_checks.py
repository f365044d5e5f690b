"""rn50.doctor's checks in this process: sqlite stores, a server that does not answer, SLURM as
information, and the report's exit status and alignment."""

import sqlite3

from helpers.store import empty_store_in
from rn50.tools import doctor


def test_an_mlflow_sqlite_store_passes(tmp_path):
    empty_store_in(tmp_path)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    assert doctor.check_tracking(uri) == ("ok", "tracking", f"{uri}: an MLflow store, writable")


def test_sqlite_store_checks(tmp_path):
    fresh = f"sqlite:///{tmp_path}/mlflow.db"
    assert doctor.check_tracking(fresh) == ("ok", "tracking", f"{fresh}: writable; the first run creates it")
    sqlite3.connect(tmp_path / "other.db").execute("CREATE TABLE t (x)").connection.close()
    other = doctor.check_tracking(f"sqlite:///{tmp_path}/other.db")
    assert other.status == "FAIL" and "a sqlite file but not an MLflow store; fix: give mlflow.tracking_uri" in other.detail
    missing = doctor.check_tracking(f"sqlite:///{tmp_path}/no/such/mlflow.db")
    assert missing.status == "FAIL" and f"the folder {tmp_path}/no/such does not exist" in missing.detail


def test_a_server_that_does_not_answer_fails_fast():
    check = doctor.check_tracking("http://127.0.0.1:9")
    assert check.status == "FAIL" and check.detail.startswith("http://127.0.0.1:9: no answer")
    assert "fix: start the server (launchers/mlflow_server.sh)" in check.detail


def test_slurm_is_information_unless_asked_for(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert doctor.check_slurm(False) == ("info", "slurm", "sbatch, srun, sinfo not on PATH (only cluster=slurm needs them)")
    assert doctor.check_slurm(True).status == "FAIL"


def test_report_exit_status_and_alignment(capsys):
    checks = [doctor.Check("ok", "python", "3.11"), doctor.Check("warn", "gpus", "none; fix: x"),
              doctor.Check("info", "slurm", "absent")]
    assert doctor.report(checks) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == ["ok    python  3.11", "warn  gpus    none; fix: x", "info  slurm   absent"]
    assert out[3] == "rn50.doctor: ready for `python -m rn50` (warnings: gpus)"
    assert doctor.report(checks + [doctor.Check("FAIL", "mlflow", "missing; fix: y")]) == 1
