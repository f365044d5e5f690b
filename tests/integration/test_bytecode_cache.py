"""rn50/measure/bytecode.py: where the environment turned Python's bytecode cache off and the packages were
installed without it, rn50's processes and those they start keep it in rn50's cache folder (issue 42: each
rank compiled torch's sources at every start). Each case is a fresh interpreter, as a run's processes are."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT
from rn50.measure import bytecode

# The parent sets the cache as `python -m rn50` does, probing the test's own module (`mine`, which has no
# bytecode beside it until Python writes one), imports it, then starts a child as the pool starts a rank.
SCRIPT = """
import subprocess, sys
from rn50.measure import bytecode
bytecode.set_bytecode_cache(probe="mine")
import mine
print(sys.pycache_prefix, sys.dont_write_bytecode, bytecode.described(probe="mine").replace(" ", "_"))
child = "import sys, os; print(sys.pycache_prefix, sys.dont_write_bytecode, 'PYTHONDONTWRITEBYTECODE' in os.environ)"
sys.stdout.flush()
subprocess.run([sys.executable, "-c", child], check=True)
"""
CLEAN = ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX", "RN50_BYTECODE_CACHE")


def environment(tmp_path: Path, **env: str) -> dict:
    base = {k: v for k, v in os.environ.items() if k not in CLEAN}
    return {**base, "XDG_CACHE_HOME": str(tmp_path / "xdg"),
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)]), **env}


def start(tmp_path: Path, *flags: str, **env: str) -> list:
    (tmp_path / "mine.py").write_text("X = 1\n")
    out = subprocess.run([sys.executable, *flags, "-c", SCRIPT], env=environment(tmp_path, **env), cwd=tmp_path,
                         capture_output=True, text=True, check=True).stdout
    return [line.split() for line in out.splitlines()]


def test_where_the_environment_turned_bytecode_off_it_is_kept_in_rn50s_cache(tmp_path):
    kept = str(tmp_path / "xdg" / "rn50" / "pycache")
    parent, child = start(tmp_path, PYTHONDONTWRITEBYTECODE="1")
    assert parent == [kept, "False", kept]  # the run's tag names it
    assert child == [kept, "False", "False"]  # a rank inherits it
    assert list(Path(kept).rglob("mine.*.pyc")) and not list(tmp_path.glob("__pycache__"))  # nothing beside
    # -B is taken as the variable is
    parent, child = start(tmp_path, "-B")
    assert parent[0] == child[0] == kept


def test_bytecode_installed_beside_the_sources_is_read_as_it_is(tmp_path):
    """A cache folder would hide it: the first start would compile everything again."""
    (tmp_path / "mine.py").write_text("X = 1\n")
    subprocess.run([sys.executable, "-c", "import mine"], env=environment(tmp_path), cwd=tmp_path, check=True)
    assert list(tmp_path.glob("__pycache__/mine.*.pyc"))  # as pip installs it, compiled
    assert start(tmp_path, PYTHONDONTWRITEBYTECODE="1")[0] == ["None", "True", "beside_the_sources,_not_written"]
    assert start(tmp_path, PYTHONDONTWRITEBYTECODE="1", RN50_BYTECODE_CACHE="on")[0][0] == str(
        tmp_path / "xdg" / "rn50" / "pycache")  # on: wherever Python's is off


def test_the_users_choices_and_an_unwritable_cache_are_left_as_they_are(tmp_path):
    # each case in a folder of its own: `mine` without bytecode beside it, as the probe needs
    def fresh(name: str) -> Path:
        (tmp_path / name).mkdir()
        return tmp_path / name

    assert start(fresh("own"))[0] == ["None", "False", "beside_the_sources"]  # Python's own cache
    where = fresh("off")
    assert start(where, PYTHONDONTWRITEBYTECODE="1", RN50_BYTECODE_CACHE="off")[0] == [
        "None", "True", "none:_compiled_at_every_start"]
    # a place named, with writing off: nothing is written
    where = fresh("named")
    named = str(where / "mine_cache")
    assert start(where, PYTHONDONTWRITEBYTECODE="1", PYTHONPYCACHEPREFIX=named)[0][:2] == [named, "True"]
    where = fresh("unwritable")
    (where / "file").write_text("")  # a cache folder that cannot be made: as Python had it, and it goes on
    assert start(where, PYTHONDONTWRITEBYTECODE="1", RN50_BYTECODE_CACHE="on",
                 XDG_CACHE_HOME=str(where / "file"))[0][:2] == ["None", "True"]
    # a relative XDG_CACHE_HOME is ignored, as the XDG specification says: ~/.cache
    where = fresh("relative")
    assert start(where, PYTHONDONTWRITEBYTECODE="1", RN50_BYTECODE_CACHE="on", XDG_CACHE_HOME="rel",
                 HOME=str(where / "home"))[0][0] == str(where / "home" / ".cache" / "rn50" / "pycache")
    assert start(fresh("empty"), PYTHONDONTWRITEBYTECODE="1", RN50_BYTECODE_CACHE="")[0][0] != "None"  # auto


@pytest.mark.slow  # `python -m rn50` as a user starts it, twice
@pytest.mark.parametrize("choice", ["on", "auto"])
def test_python_m_rn50_sets_it_before_its_imports(tmp_path, choice):
    """The entry point every run starts from: Hydra's modules, imported after it, are compiled into the
    cache; with auto only where torch was installed without its bytecode (on most machines it was)."""
    kept = choice == "on" or bytecode.installed_without_bytecode()
    env = environment(tmp_path, RN50_BYTECODE_CACHE=choice)
    subprocess.run([sys.executable, "-B", "-m", "rn50", "--help"], env=env, cwd=tmp_path, capture_output=True,
                   check=True)
    assert bool(list((tmp_path / "xdg" / "rn50" / "pycache").rglob("hydra/__init__.*.pyc"))) is kept


def test_a_choice_that_is_not_one_is_refused_in_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "rn50", "--help"], cwd=tmp_path, capture_output=True, text=True,
                          env=environment(tmp_path, RN50_BYTECODE_CACHE="Yes"))
    assert proc.returncode != 0 and proc.stderr.strip() == "RN50_BYTECODE_CACHE=Yes is not one of auto, on, off"
