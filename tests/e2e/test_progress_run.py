"""A real run whose first step is slow shows heartbeat lines, then the time left."""

import re

import pytest

from helpers import TESTS, TINY
from helpers.cli import rn50


@pytest.mark.slow
def test_a_slow_first_step_shows_heartbeat_lines_then_the_time_left(tmp_path):
    """A real run, away from a terminal, whose first step takes 13 s (tests/helpers/slow_steps.py: a profiler
    of its own whose callback sleeps, as a step that autotunes cuDNN or compiles) and later ones 2.5 s."""
    # amp: its CPU warning is the one a run prints before its progress.
    proc = rn50(tmp_path, *TINY, "precision=amp", "profiler._target_=helpers.slow_steps.SlowSteps",
                "bench.warmup_steps=6", env={"PYTHONPATH": str(TESTS)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stderr.splitlines()
    warmup = [line for line in lines if line.startswith("rn50: warm-up")]
    assert warmup[0] == "rn50: warm-up 0/6 steps"
    assert re.fullmatch(r"rn50: warm-up 0/6 steps, 1\d s", warmup[1]), warmup  # alive, in the first step
    assert [line for line in warmup if re.fullmatch(r"rn50: warm-up [2-5]/6 steps, \d+ s, ~\d+ s left", line)], warmup
    # Warnings and progress share stderr, in the order they happened; stdout says where the results are.
    warning = next(i for i, line in enumerate(lines) if "precision=amp on the CPU" in line)
    assert warning < lines.index(warmup[0])
    assert proc.stdout.startswith("results in ") and proc.stdout.count("\n") == 1, proc.stdout
