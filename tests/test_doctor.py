"""rn50.doctor: names what is missing, with the fix, and fails only for what the default run needs.
(That it passes in a venv installed from a wheelhouse is in test_wheelhouse.py.)"""

import os
import re
import shutil
import sqlite3
import subprocess
import sys

import pytest

from conftest import ROOT, _empty_store
from rn50.tools import doctor
from test_tracking_server import server  # noqa: F401  a real MLflow server


@pytest.mark.slow
def test_a_hidden_module_is_named_with_its_fix(tmp_path):
    # `import mlflow` fails as on a node where the wheelhouse was not installed.
    shim = tmp_path / "shim" / "mlflow"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("raise ImportError('No module named mlflow (hidden by the test)')\n")
    env = {**os.environ, "PYTHONPATH": f"{shim.parent}:{ROOT}"}
    proc = subprocess.run([sys.executable, "-m", "rn50.doctor"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (line,) = [l for l in proc.stdout.splitlines() if l.startswith("FAIL")]
    assert re.match(r"FAIL\s+mlflow\s+cannot import mlflow \(ImportError: No module named mlflow \(hidden by the "
                    r"test\)\); fix: pip install --no-index --find-links WHEELHOUSE 'rn50'", line), line
    assert re.search(r"^ok\s+hydra\s", proc.stdout, flags=re.M)
    assert proc.stdout.splitlines()[-1] == "rn50.doctor: 1 problem(s) the default run needs fixed: mlflow"


@pytest.mark.slow  # making an MLflow store takes seconds (once a session)
def test_an_mlflow_sqlite_store_passes(tmp_path):
    shutil.copy(_empty_store(), tmp_path / "mlflow.db")
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


@pytest.mark.slow
def test_a_server_is_written_to_and_cleaned_up(server):  # noqa: F811
    uri, _ = server
    check = doctor.check_tracking(uri)
    assert check == ("ok", "tracking", f"{uri}: answers; made and deleted a throw-away experiment and run")
    from mlflow.tracking import MlflowClient
    from mlflow.entities import ViewType

    left = [e.name for e in MlflowClient(uri).search_experiments(view_type=ViewType.ACTIVE_ONLY)]
    assert not any(name.startswith("rn50-doctor-") for name in left)


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
