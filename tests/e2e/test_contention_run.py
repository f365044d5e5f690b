"""A figure taken while something else loaded the host says so (issue 43): in its headline, as tags and
in the sweep report. Real busy processes beside a real run."""

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import TINY
from helpers.cli import rn50
from helpers.store import runs_in

pytestmark = pytest.mark.slow


def test_a_run_beside_busy_processes_is_tagged_contended(tmp_path):
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]  # both cores of CI's
    try:
        proc = rn50(tmp_path, "--multirun", *[a for a in TINY if not a.startswith("bench.steps")], "bench.steps=20")
    finally:
        for p in busy:
            p.kill()
            p.wait()
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "; contended: other processes kept " in proc.stderr
    (run,) = [r for r in runs_in(tmp_path) if r.data.tags.get("rn50.role") != "sweep"]
    assert run.data.tags["contended"] == "true" and run.data.metrics["host/other_cpu_cores"] > 0.5
    assert run.data.tags["contention"].startswith("other processes kept ")
    (parent,) = [r for r in runs_in(tmp_path) if r.data.tags.get("rn50.role") == "sweep"]
    (row,) = csv.DictReader(open(Path(parent.data.tags["sweep.dir"]) / "sweep_report.csv"))
    assert row["contended"] == "yes" and row["contention"] == run.data.tags["contention"]
    assert "| contended |" in (Path(parent.data.tags["sweep.dir"]) / "sweep_report.md").read_text()
