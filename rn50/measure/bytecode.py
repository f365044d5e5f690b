"""Python's bytecode cache for rn50's processes, where the environment turned it off.

An image that sets PYTHONDONTWRITEBYTECODE=1 before installing its packages has no .pyc beside their
sources, and Python then compiles every module it imports at every start: on an H200 host whose image did
so (torch's folder held no .pyc), a default run's `ranks` stage (rn50/measure/timing.py) took 11.9 to 14.6 s,
and 5.6 and 6.2 s with a bytecode cache (docs/benchmarks.md, issue 42). Where the installed bytecode is
there, Python reads it whatever the variable says, and nothing is done: a cache folder (sys.pycache_prefix)
hides every __pycache__ beside the sources, so the first start would compile them all again.

`python -m rn50` calls set_bytecode_cache() before its other imports (rn50/__main__.py): the process every
run starts from, the launcher or, under torchrun and SLURM, the rank itself; a rank that SLURM runs as a
sweep's task, without `python -m rn50`, calls it again before it imports torch (rn50/launcher/launch.py).
Its ranks, and what they start, inherit the variables it sets; a child started with -B (multiprocessing's
spawn passes it whenever this interpreter started with writing off) reads the cache but does not add to it.
Where torch has no bytecode but Python's own library does, the first start compiles that library into the
cache too (a cache folder hides what lies beside the sources), once. Torch-free: importing torch is what it
speeds up."""

import importlib.util
import os
import sys

from rn50.measure.settings import rn50_cache, writable_dir

PREFIX_ENV, OFF_ENV, CHOICE_ENV = "PYTHONPYCACHEPREFIX", "PYTHONDONTWRITEBYTECODE", "RN50_BYTECODE_CACHE"
CHOICES = ("auto", "on", "off")


def installed_without_bytecode(package: str = "torch") -> bool:
    """Whether `package` (found, not imported) has no bytecode beside its sources. torch: most of a rank's
    imports, installed with the rest of the image."""
    spec = importlib.util.find_spec(package)
    origin = spec.origin if spec is not None else None
    if not origin or not origin.endswith(".py"):
        return False
    return not os.path.exists(importlib.util.cache_from_source(origin))


def set_bytecode_cache(probe: str = "torch") -> None:
    """Where Python's bytecode cache is off (PYTHONDONTWRITEBYTECODE, or -B) and no place is named for it
    (PYTHONPYCACHEPREFIX), keep it in rn50/pycache under the user's cache folder (rn50_cache): for this
    process (importlib reads sys.pycache_prefix and sys.dont_write_bytecode at each import) and those it
    starts (the variables). RN50_BYTECODE_CACHE chooses: auto (the default) where `probe` was installed
    without bytecode, on wherever Python's is off, off never. Nothing is written beside the sources."""
    given = os.environ.get(CHOICE_ENV, "")
    choice = given.strip().lower() or "auto"  # empty: unset, as Python takes its own PYTHON* variables
    if choice not in CHOICES:
        raise SystemExit(f"{CHOICE_ENV}={given} is not one of {', '.join(CHOICES)}")
    if choice == "off" or not sys.dont_write_bytecode or sys.pycache_prefix is not None:
        return
    if choice == "auto" and not installed_without_bytecode(probe):
        return
    where = os.path.join(rn50_cache(), "pycache")
    if not os.path.isabs(where) or not writable_dir(where):  # no home to keep it in: as Python had it
        return
    sys.pycache_prefix, sys.dont_write_bytecode = where, False
    os.environ[PREFIX_ENV] = where
    os.environ.pop(OFF_ENV, None)


def described(probe: str = "torch") -> str:
    """This process's bytecode, for a run's tags (it sets much of time/startup_ranks_s): the folder it is kept
    in; "none" where `probe` has none beside its sources and none is written (compiled at every start); else
    beside the sources (read only, where Python's writing is off)."""
    if sys.pycache_prefix:
        return sys.pycache_prefix
    if sys.dont_write_bytecode and installed_without_bytecode(probe):
        return "none: compiled at every start"
    return "beside the sources" + (", not written" if sys.dont_write_bytecode else "")
