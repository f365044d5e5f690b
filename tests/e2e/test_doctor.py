"""python -m rn50.doctor names a missing module with its fix, and writes to a real server and cleans up
(its checks in this process: tests/integration/test_doctor_checks.py; that it passes in a venv installed
from a wheelhouse: test_wheelhouse.py)."""

import os
import re
import subprocess
import sys

import pytest

from helpers import ROOT
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
                          text=True)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (line,) = [l for l in proc.stdout.splitlines() if l.startswith("FAIL")]
    assert re.match(r"FAIL\s+mlflow\s+cannot import mlflow \(ImportError: No module named mlflow \(hidden by the "
                    r"test\)\); fix: pip install --no-index --find-links WHEELHOUSE 'rn50'", line), line
    assert re.search(r"^ok\s+hydra\s", proc.stdout, flags=re.M)
    assert proc.stdout.splitlines()[-1] == "rn50.doctor: 1 problem(s) the default run needs fixed: mlflow"


@pytest.mark.slow
def test_a_server_is_written_to_and_cleaned_up(server):  # noqa: F811
    uri, *_ = server
    check = doctor.check_tracking(uri)
    assert check == ("ok", "tracking", f"{uri}: answers; made and deleted a throw-away experiment and run")
    from mlflow.tracking import MlflowClient
    from mlflow.entities import ViewType

    left = [e.name for e in MlflowClient(uri).search_experiments(view_type=ViewType.ACTIVE_ONLY)]
    assert not any(name.startswith("rn50-doctor-") for name in left)
