"""CUDA_DEVICE_MAX_CONNECTIONS as a fresh rank process and the bare loop's run set it."""

import os
import subprocess
import sys

from helpers import ROOT

SHOW = "print('CUDA_DEVICE_MAX_CONNECTIONS', os.environ.get('CUDA_DEVICE_MAX_CONNECTIONS'))"


def seen(code: str, given=None) -> list:
    """The value after each SHOW in code, run in a fresh process (given: the user's own value)."""
    env = {k: v for k, v in os.environ.items() if k != "CUDA_DEVICE_MAX_CONNECTIONS"}
    env.update(PYTHONPATH=str(ROOT), **({"CUDA_DEVICE_MAX_CONNECTIONS": given} if given else {}))
    done = subprocess.run([sys.executable, "-c", f"import os; {code}"], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return [line.split()[1] for line in done.stdout.splitlines() if line.startswith("CUDA_DEVICE_MAX_CONNECTIONS ")]


def test_ranks_and_the_bare_loop_give_cuda_32_work_queues_unless_the_user_chose():
    assert seen(f"import rn50.rank.run; {SHOW}") == ["32"]  # a rank process, before its CUDA context
    assert seen(f"import rn50.rank.run; {SHOW}", given="4") == ["4"]
    # Set by the bare loop's run, not by importing it: one process shows both.
    bare = ("from rn50 import baseline; baseline.main(['--arch', 'resnet18', '--image-size', '32', "
            "'--batch-size', '2', '--warmup-steps', '1', '--steps', '1', '--precision', 'fp32'])")
    assert seen(f"import rn50.baseline; {SHOW}; {bare}; {SHOW}") == ["None", "32"]
