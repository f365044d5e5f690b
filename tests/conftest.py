"""Shared by every layer of tests: the composed config (compose_cfg), TINY's shrunk run, the CLI
runner (rn50) and the empty MLflow store it copies.

tests/unit: no process, no store, no network: seconds in all. tests/integration: composed and
shrunk configs, one CPU rank in this process, a local sqlite store. tests/e2e: `python -m rn50`
and other processes, sweeps, SLURM, servers, a browser, pip; all marked slow below.
The helpers here (netns.py, slurm_cluster.py, tiny_module.py, slow_steps.py, digits.py, data/)
are importable from every layer: pytest puts this folder on sys.path.
"""
import copy
import fcntl
import functools
import gc
import os
import shutil
import subprocess
import tempfile
import sys
from importlib import metadata
from pathlib import Path

# pytest-xdist runs 2 workers on CI's 2 cores: one thread each for torch here and in every rn50
# subprocess, or each would spin 2 OpenMP threads and the runs slow each other down several-fold.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402
from hydra._internal.config_loader_impl import ConfigLoaderImpl  # noqa: E402
from hydra.core.global_hydra import GlobalHydra  # noqa: E402
from hydra.core.override_parser.overrides_parser import OverridesParser  # noqa: E402

import rn50.config.schema  # noqa: F401,E402  registers the schema Hydra composes into
from slurm_cluster import slurm_cluster, slurm_two_nodes  # noqa: F401,E402  SLURM test clusters for the session

ROOT = Path(__file__).resolve().parent.parent
CONF = ROOT / "conf"
# A run small enough for a 2-core CPU: seconds, not minutes. fp32: fp16 autocast is many times
# slower on CPUs, and amp's dynamic scale (65,536 at first) skips a fresh network's first steps,
# so a 3-step amp run never trains and fails as stalled (rn50/measure/trained.py).
TINY = [
    "dist.accelerator=cpu",
    "precision=fp32",
    "model=resnet18",
    "data.image_size=32",
    "data.batch_size=4",
    "bench.warmup_steps=1",
    "bench.steps=2",
    "bench.comm_iters=2",
]


@functools.lru_cache(maxsize=None)
def _composed(overrides: tuple):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


@functools.lru_cache(maxsize=None)
def _is_group(key: str) -> bool:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return GlobalHydra.instance().config_loader().repository.group_exists(key)


def compose_as_hydra(overrides=()):
    """The config `python -m rn50 OVERRIDES` composes, as Hydra composes it, in a tenth of the time.

    Hydra (defaults_list.Overrides) takes the overrides that choose a config group, with a name rather
    than a dict for a value, to build the defaults list; composes it; then sets every other override on the
    result in the order given (ConfigLoaderImpl._apply_overrides_to_config). Here the first part is
    composed once a session for each set of choices, and the rest is set on a copy with Hydra's own
    function. Overrides that change that path are composed whole, as Hydra composes them: sweeps (which
    Hydra refuses here), Hydra's own keys and groups (hydra.searchpath adds groups; cfg.hydra is not
    kept), and packages (key@package). tests/unit/test_compose_helper.py compares the two."""
    parsed = OverridesParser.create().parse_overrides(list(overrides))
    if any(o.is_sweep_override() or o.is_hydra_override() or o.package is not None for o in parsed):
        return copy.deepcopy(_composed(tuple(overrides)))
    chooses = [_is_group(o.key_or_group) and not isinstance(o.value(), dict) for o in parsed]
    cfg = copy.deepcopy(_composed(tuple(o.input_line for o, c in zip(parsed, chooses) if c)))
    ConfigLoaderImpl._apply_overrides_to_config([o for o, c in zip(parsed, chooses) if not c], cfg)
    return cfg


@pytest.fixture
def compose_cfg():
    """compose_cfg(overrides): the config `python -m rn50 OVERRIDES` composes (compose_as_hydra).
    Each call gets its own copy."""
    return compose_as_hydra


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


@functools.lru_cache(maxsize=None)
def _empty_store() -> Path:
    """An MLflow sqlite store with its schema made once for this machine and MLflow version, shared by
    pytest-xdist's workers and later sessions: making one costs seconds. Tests copy it, never write it."""
    path = Path(tempfile.gettempdir()) / f"rn50-tests-empty-store-mlflow-{metadata.version('mlflow')}.db"
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one worker makes it while the others wait
        if not path.exists():
            from mlflow.tracking import MlflowClient  # here, not at the top: MLflow takes seconds to import

            made = Path(tempfile.mkdtemp()) / "mlflow.db"
            MlflowClient(f"sqlite:///{made}").search_experiments()
            shutil.move(made, path.with_suffix(".tmp"))
            os.replace(path.with_suffix(".tmp"), path)  # whole or not at all, should a session be killed
    return path


def rn50(cwd, *args, module="rn50", fresh_store=False, env=None):
    """Run `python -m rn50 ARGS` in cwd as a user would; returns the CompletedProcess.

    cwd gets a copy of an empty ./mlflow.db unless fresh_store, which leaves rn50 to create it.
    env: variables to set on top of this process's. No time limit: a run on a busy machine takes
    as long as it takes (a fixed limit failed the digits run at 600 s); CI's own limit ends a hang.
    """
    if module == "rn50" and not fresh_store and not (Path(cwd) / "mlflow.db").exists():
        shutil.copy(_empty_store(), Path(cwd) / "mlflow.db")
    extra = (env or {}).get("PYTHONPATH")  # a test's own modules, after rn50's
    env = {**os.environ, **(env or {}), "PYTHONPATH": os.pathsep.join([str(ROOT), *([extra] if extra else [])])}
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=cwd, env=env, capture_output=True, text=True,
    )


def runs_in(cwd, experiment="rn50"):
    """Every MLflow run in the launch directory's default store."""
    db = Path(cwd) / "mlflow.db"
    if not db.exists():
        return []
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{db}")
    exp = client.get_experiment_by_name(experiment)
    return client.search_runs([exp.experiment_id]) if exp else []


def make_tree(root, classes=3, per_class=4, size=(80, 60)):
    """A small ImageFolder tree of real JPEGs: root/train/<class>/*.JPEG and root/val/."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    for split, count in (("train", per_class), ("val", 1)):
        for c in range(classes):
            folder = Path(root) / split / f"n{c:08d}"
            folder.mkdir(parents=True, exist_ok=True)
            for i in range(count):
                pixels = rng.integers(0, 255, (size[1], size[0], 3), dtype=np.uint8)
                Image.fromarray(pixels).save(folder / f"n{c:08d}_{i}.JPEG", quality=85)
    return Path(root)


E2E = Path(__file__).resolve().parent / "e2e"


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
