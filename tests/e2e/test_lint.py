"""ruff, as configured in pyproject.toml, finds nothing: CI runs it through this test."""

import subprocess
import sys

from conftest import ROOT


def test_ruff_finds_nothing():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "rn50", "hydra_plugins", "tests", "benchmarks"],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-1000:]
