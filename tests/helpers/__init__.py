"""What the tests of every layer share, one home for each (tests/conftest.py keeps only fixtures and hooks).

Importable as `helpers` from any test module: pytest puts tests/ on sys.path. A process a test
starts finds them with tests/ (TESTS) on its PYTHONPATH: profiler._target_=helpers.slow_steps.SlowSteps.
This module imports nothing heavy, so such a process pays nothing for it.

  helpers (here)           the repository's paths (ROOT, CONF, TESTS, DATA) and TINY's shrunk run
  helpers.cli              rn50(): `python -m rn50 ARGS` run as a user would
  helpers.store            the empty MLflow store made once a machine, copied into a folder; its runs
  helpers.compose          compose_as_hydra: the config `python -m rn50 OVERRIDES` composes, fast
  helpers.images           make_tree: a small ImageFolder tree of JPEGs; REAL: TINY on such a tree
  helpers.digits           scikit-learn's 8x8 digits as a tree, and the train=accuracy run that learns them
  helpers.ncu_data         Nsight Compute's exports and logs in DATA, as the ncu tests read them
  helpers.servers          free_port, and waiting for a server to answer
  helpers.devices          DEVICES: cpu, and cuda marked gpu, to parametrize a test by
  helpers.netns            a test network of hosts on this machine (network namespaces)
  helpers.slurm_cluster    real SLURM clusters and their session fixtures (tests/conftest.py takes them)
  helpers.tiny_module      the smallest Lightning module that trains
  helpers.slow_steps       a profiler that makes steps slow on purpose, for a `python -m rn50` run
  helpers.slow_network     a profiler that slows its test host's link as the windows begin (tc), for the same
"""
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
ROOT = TESTS.parent
CONF = ROOT / "conf"
DATA = TESTS / "data"  # files the tests read: real tools' outputs, cut down

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
