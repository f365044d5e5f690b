"""A second compiled run with kernel tuning loads its kernels from inductor's cache and does not tune them
again (issue 42). On its own torch 2.11 tunes them again (pytorch/pytorch#172819: 44.8 s of a warm
2-GPU experiment=fastest's 62 s first step); rn50/rank/warm_compile.py keeps it from doing so, and torch
2.12 on is fixed. The same settings twice in a compile cache of the test's own, on a small network so
that the first compile takes a minute or two, not five. Needs a CUDA GPU:
`python -m pytest -n 0 -m gpu tests/e2e/test_warm_compile_gpu.py` on a GPU machine."""

import json
import re

import pytest

from helpers.cli import rn50

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

SETTINGS = ["model=resnet18", "model.compile=true", "model.cuda_graphs=true", "model.autotune_pointwise=true",
            "model.autotune_coordinate_descent=true", "data.batch_size=128", "bench.warmup_steps=5",
            "bench.steps=20"]


def cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def first_step(run, run_dir) -> tuple:
    """Rank 0's own account of its first step: (seconds spent tuning kernels, from torch's timers in its
    log; what the cache held, from the run's console)."""
    log = (run_dir / "rank0.log").read_text()
    timers = next(line for line in log.splitlines() if "torch.compile's timers in the first step" in line)
    tuned = re.search(r"CachingAutotuner\.coordinate_descent_tuning ([0-9.]+)", timers)
    console = (run.stdout + run.stderr).splitlines()
    compiled = next(line for line in console if "first step, with the compile" in line)
    return (float(tuned.group(1)) if tuned else 0.0), compiled


@pytest.mark.skipif(not cuda(), reason="needs a CUDA GPU")
def test_a_second_compiled_run_does_not_tune_its_kernels_again(tmp_path):
    env = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache")}
    seen = {}
    for name in ("first", "second"):
        run = rn50(tmp_path, *SETTINGS, f"hydra.run.dir={name}", env=env)
        assert run.returncode == 0, run.stderr[-2000:]
        summary = json.loads((tmp_path / name / "summary.json").read_text())
        assert summary["train/loss_last"] < summary["train/loss_first"], summary
        seen[name] = (*first_step(run, tmp_path / name), summary["time/startup_s"] + summary["time/warmup_s"])
        print(f"{name}: tuned {seen[name][0]:.1f} s; {seen[name][1]}; {seen[name][2]:.1f} s to the first measured step")
    assert "compiled and cached" in seen["first"][1] and seen["first"][0] > 1  # the first run tuned
    # every graph from the cache (a mix reads "N graph(s) loaded from the cache in DIR, M compiled")
    assert "loaded from the cache" in seen["second"][1] and "graph(s)" not in seen["second"][1]
    # 68.8 s tuned again for experiment=fastest with the launcher off alone, 1.2 s with both settings
    assert seen["second"][0] < 0.2 * seen["first"][0], seen
