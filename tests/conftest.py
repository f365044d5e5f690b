"""The fixtures, hooks and marker setup shared by every layer of tests. Everything else they share
(paths, TINY, the CLI runner, the MLflow store, compose_as_hydra, the SLURM clusters...) lives in
tests/helpers, one module per concern (its docstring lists them): `from helpers.cli import rn50`.

tests/unit: no process, no store, no network: seconds in all. tests/integration: composed and
shrunk configs (compose_cfg, helpers.TINY), one CPU rank in this process, a local sqlite store
(helpers.store). tests/e2e: `python -m rn50` (helpers.cli) and other processes, sweeps, SLURM,
servers, a browser, pip; all marked slow below.
helpers is importable from every layer, pytest putting this folder on sys.path, and from a process
a test starts with this folder on its PYTHONPATH; tests/data holds the files tests read (helpers.DATA).
"""
import gc
import os
from pathlib import Path

# pytest-xdist runs 2 workers on CI's 2 cores: one thread each for torch here and in every rn50
# subprocess, or each would spin 2 OpenMP threads and the runs slow each other down several-fold.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402

from helpers import TESTS  # noqa: E402
from helpers.compose import compose_as_hydra  # noqa: E402
from helpers.images import make_tree  # noqa: E402
from helpers.slurm_cluster import slurm_cluster, slurm_two_nodes  # noqa: F401,E402  SLURM test clusters for the session


@pytest.fixture
def compose_cfg():
    """compose_cfg(overrides): the config `python -m rn50 OVERRIDES` composes (helpers.compose.compose_as_hydra).
    Each call gets its own copy."""
    return compose_as_hydra


@pytest.fixture(scope="module")
def image_tree(tmp_path_factory):
    """helpers.images.make_tree's ImageFolder tree, made once for a test module; tests only read it."""
    return make_tree(tmp_path_factory.mktemp("imagenet"))


@pytest.fixture
def one_rank_group(tmp_path):
    """torch's default process group of one gloo rank in this process, for DDP; destroyed after."""
    import torch.distributed

    torch.distributed.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0,
                                         world_size=1)
    yield
    torch.distributed.destroy_process_group()


@pytest.fixture
def launcher_signals():
    """The launcher's stop handlers (rn50/launcher/stop.py) for the test, as `python -m rn50` sets
    them; the handlers before are put back afterwards."""
    import signal

    from rn50.launcher import stop
    from rn50.launcher.stop import STOP_SIGNALS

    before = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    for signum in STOP_SIGNALS:
        signal.signal(signum, stop._interrupted)
    yield
    for signum, handler in before.items():
        signal.signal(signum, handler)


E2E = TESTS / "e2e"


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups, and before -m selects
def pytest_collection_modifyitems(config, items):
    """Every test in tests/e2e is slow: it starts processes (`-m "not slow"` leaves them out).
    Under pytest-xdist (pyproject's addopts), tests that share an expensive fixture run on one
    worker: each SLURM cluster, and the wheelhouse built once for its module."""
    for item in items:
        if E2E in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.slow)
        if "slurm_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("slurm"))
        elif "slurm_two_nodes" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("slurm_two_nodes"))
        elif item.module.__name__ == "test_wheelhouse":
            item.add_marker(pytest.mark.xdist_group("wheelhouse"))


def pytest_collection_finish(session):
    """Collection has imported every test module and what they import (torch, Lightning, Hydra: hundreds
    of thousands of objects that live to the end). Frozen, they are left out of every later garbage
    collection: the interpreter's own during the tests, pytest's at the end and the one at exit, each of
    which would walk them all again."""
    gc.freeze()
