"""`python -m rn50 ARGS` (or another of rn50's modules) run as a user would, in a process of its own."""
import os
import subprocess
import sys
from pathlib import Path

from helpers import ROOT
from helpers.store import empty_store_in


def rn50(cwd, *args, module="rn50", fresh_store=False, env=None):
    """Run `python -m rn50 ARGS` in cwd as a user would; returns the CompletedProcess.

    cwd gets a copy of an empty ./mlflow.db unless fresh_store, which leaves rn50 to create it.
    env: variables to set on top of this process's; its PYTHONPATH (a test's own modules) comes after
    rn50's. No time limit: a run on a busy machine takes as long as it takes (a fixed limit failed the
    digits run at 600 s); CI's own limit ends a hang.
    """
    if module == "rn50" and not fresh_store and not (Path(cwd) / "mlflow.db").exists():
        empty_store_in(cwd)
    extra = (env or {}).get("PYTHONPATH")  # a test's own modules, after rn50's
    env = {**os.environ, **(env or {}), "PYTHONPATH": os.pathsep.join([str(ROOT), *([extra] if extra else [])])}
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=cwd, env=env, capture_output=True, text=True,
    )
