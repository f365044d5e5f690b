"""launchers/mlflow_server.sh starts a real server that rn50 runs log to over http."""

import os
import subprocess
from pathlib import Path

import pytest

from helpers import ROOT, TINY
from helpers.cli import rn50
from helpers.servers import free_port, wait_for_server
from helpers.store import empty_store_in
from rn50.tracking.client import MlflowClient

pytestmark = pytest.mark.slow  # a real MLflow server


@pytest.fixture
def server(tmp_path):
    port = free_port()
    empty_store_in(tmp_path, "server.db")  # made once a session: a fresh schema takes the server seconds
    env = {**os.environ, "PATH": f"{Path(os.sys.executable).parent}:{os.environ['PATH']}"}
    env.pop("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", None)  # the script's own default, whatever this shell has
    proc = subprocess.Popen(
        [str(ROOT / "launchers" / "mlflow_server.sh"), "--port", str(port), "--workers", "1",
         "--backend", f"sqlite:///{tmp_path}/server.db", "--artifacts", str(tmp_path / "artifacts")],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    uri = f"http://127.0.0.1:{port}"
    wait_for_server(uri + "/health", proc, "mlflow server")
    yield uri, tmp_path, proc.pid  # the pid is the server's session: start_new_session
    os.killpg(proc.pid, 15)
    proc.wait(timeout=30)


def test_run_logs_to_a_tracking_server(server, tmp_path_factory):
    uri, server_dir, session = server
    cwd = tmp_path_factory.mktemp("launch")
    proc = rn50(cwd, *TINY, f"mlflow.tracking_uri={uri}", fresh_store=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    client = MlflowClient(uri)
    (run,) = client.search_runs([client.get_experiment_by_name("rn50").experiment_id])
    assert run.info.status == "FINISHED" and run.data.metrics["throughput/images_per_sec"] > 0
    assert {"summary.json", "step_times.csv"} <= {a.path for a in client.list_artifacts(run.info.run_id)}
    assert any((server_dir / "artifacts").rglob("summary.json"))  # uploaded through the server
    assert not (cwd / "mlflow.db").exists()
    commands = session_commands(session)
    assert any("mlflow server" in cmd for cmd in commands), commands  # the script's server, found
    assert not [cmd for cmd in commands if "mlflow.server.jobs" in cmd]  # with MLflow's job runner off


def session_commands(session: int) -> list:
    """The command lines of the processes in a session, from /proc."""
    commands = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()  # after "pid (comm)": state ppid pgrp session
            if int(fields[3]) == session:
                commands.append((stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except (OSError, IndexError, ValueError):  # a process that ended meanwhile
            continue
    return commands
