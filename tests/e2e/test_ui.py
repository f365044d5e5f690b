"""The documented MLflow UI link, in a real browser: a real sweep, a real `mlflow ui`, headless Chromium."""

import html
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile

import pytest

from helpers import TINY
from helpers.cli import rn50
from helpers.servers import free_port, wait_for_server
from helpers.store import empty_store_in, runs_in
from rn50 import tracking

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium package (.ci/run installs it)"),
]


def page_text(url: str, budget_ms: int) -> str:
    """The page's text after Chromium ran its scripts for `budget_ms` of virtual time."""
    with tempfile.TemporaryDirectory() as profile:
        dom = subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", "--window-size=1600,1000",
             f"--virtual-time-budget={budget_ms}", "--dump-dom", url],
            capture_output=True, text=True,
        ).stdout
    text = re.sub(r"<script.*?</script>|<style.*?</style>|<[^>]+>", " ", dom, flags=re.S)
    return " ".join(html.unescape(text).split())


def test_the_documented_link_shows_a_sweep_and_its_figures(tmp_path):
    empty_store_in(tmp_path)
    uri, port = f"sqlite:///{tmp_path}/mlflow.db", free_port()
    # The command the console line gives, run from elsewhere so it must name the store. It starts
    # before the sweep, to start up while the sweep runs.
    command = shlex.split(tracking.ui.ui_command(uri, port=port, cwd=str(tmp_path.parent)))
    assert command[:4] == ["mlflow", "ui", "--backend-store-uri", uri]
    # Without MLflow's GenAI job runner (as launchers/mlflow_server.sh): its consumer processes only take CPU here.
    server = subprocess.Popen([sys.executable, "-m", *command, "--workers", "1"], cwd=tmp_path.parent,
                              env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        sweep = rn50(tmp_path, "--multirun", *[a for a in TINY if not a.startswith(("data.batch_size", "bench.steps"))],
                     "data.batch_size=2,4", "bench.steps=1")
        assert sweep.returncode == 0, sweep.stderr[-3000:]
        runs = runs_in(tmp_path)
        (parent,) = [r for r in runs if r.data.tags.get("rn50.role") == "sweep"]
        children = [r for r in runs if r is not parent]
        assert len(children) == 2

        wait_for_server(f"http://127.0.0.1:{port}/health", server, "mlflow ui")
        url = tracking.ui.ui_url(uri, parent.info.experiment_id, port=port)
        wanted = [parent.info.run_name, *(c.info.run_name for c in children), "throughput/images_per_sec",
                  *(str(c.data.metrics["throughput/images_per_sec"])[:5] for c in children)]
        for budget in (15000, 30000, 60000):  # a slow host needs more virtual time to render
            text = page_text(url, budget)
            if all(w in text for w in wanted):
                break
        missing = [w for w in wanted if w not in text]
        assert not missing, f"not on the page: {missing}; page text: {text[:2000]}"
        assert "does not exist" not in text  # the saved view was found
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
