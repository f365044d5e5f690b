"""rn50/measure/settings.py's bytecode cache: where the environment turns Python's off, rn50's processes and
those they start keep it in rn50's cache folder (issue 42: without it each rank compiled torch's sources at
every start). Each case is a fresh interpreter, as a run's processes are."""

import os
import subprocess
import sys
from pathlib import Path

from helpers import ROOT

# The parent imports rn50 and a module of the test's own, then starts a child as the pool starts a rank.
SCRIPT = """
import subprocess, sys
import rn50, mine
print(sys.pycache_prefix, sys.dont_write_bytecode)
child = "import sys, os; print(sys.pycache_prefix, sys.dont_write_bytecode, 'PYTHONDONTWRITEBYTECODE' in os.environ)"
sys.stdout.flush()
subprocess.run([sys.executable, "-c", child], check=True)
"""


def start(tmp_path: Path, *flags: str, **env: str) -> list:
    (tmp_path / "mine.py").write_text("X = 1\n")
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    env = {**base, "XDG_CACHE_HOME": str(tmp_path / "xdg"), "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)]),
           **env}
    out = subprocess.run([sys.executable, *flags, "-c", SCRIPT], env=env, cwd=tmp_path, capture_output=True,
                         text=True, check=True).stdout
    return [line.split() for line in out.splitlines()]


def test_where_the_environment_turned_bytecode_off_it_is_kept_in_rn50s_cache(tmp_path):
    kept = tmp_path / "xdg" / "rn50" / "pycache"
    parent, child = start(tmp_path, PYTHONDONTWRITEBYTECODE="1")
    assert parent == [str(kept), "False"]
    assert child == [str(kept), "False", "False"]  # a rank inherits it
    assert list(kept.rglob("mine.*.pyc")) and not list(tmp_path.glob("__pycache__"))  # nothing beside the sources


def test_python_minus_b_is_treated_as_the_variable_is(tmp_path):
    parent, child = start(tmp_path, "-B")
    assert parent[0] == child[0] == str(tmp_path / "xdg" / "rn50" / "pycache")


def test_python_s_own_cache_a_named_place_and_an_unwritable_one_are_left_as_they_are(tmp_path):
    assert start(tmp_path)[0] == ["None", "False"]  # Python's own cache, beside the sources
    assert start(tmp_path, PYTHONDONTWRITEBYTECODE="1", PYTHONPYCACHEPREFIX=str(tmp_path / "mine"))[0] == [
        str(tmp_path / "mine"), "True"]  # the user named a place and said not to write: nothing changes
    (tmp_path / "file").write_text("")  # a cache folder that cannot be made: no cache, and the run goes on
    assert start(tmp_path, PYTHONDONTWRITEBYTECODE="1", XDG_CACHE_HOME=str(tmp_path / "file"))[0] == ["None", "True"]
