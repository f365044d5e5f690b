"""A profiler is one YAML file and one class, typed by its own schema where it has keys of its own
(pytorch's wait/warmup/active, ncu's steps/executable/metrics). One that rn50 has never seen runs in
tests/e2e/test_profiler_option.py."""

import pytest
from hydra.errors import ConfigCompositionException

from rn50.options import profilers
from rn50.options.profilers import profiled_steps


@pytest.mark.parametrize("option,cls,steps", [
    ("none", profilers.NoProfiler, 0), ("simple", profilers.Simple, 0),
    ("pytorch", profilers.PyTorch, 1 + 2 + 5), ("ncu", profilers.Ncu, 1),
])
def test_rn50s_profilers_are_built_from_their_option(compose_cfg, option, cls, steps):
    cfg = compose_cfg([f"profiler={option}"])
    assert type(profilers.of(cfg)) is cls and profiled_steps(cfg) == steps
    assert profilers.of(cfg).starts_ranks == (option == "ncu")


def test_each_profiler_has_only_its_own_keys(compose_cfg):
    assert profiled_steps(compose_cfg(["profiler=pytorch", "profiler.active=7", "profiler.wait=0"])) == 9
    assert compose_cfg(["profiler=ncu"]).profiler.metrics  # conf/profiler/ncu.yaml's table
    for bad in (["profiler.active=3"], ["profiler=ncu", "profiler.active=3"], ["profiler=pytorch", "profiler.steps=2"]):
        with pytest.raises(ConfigCompositionException):
            compose_cfg(bad)
    assert compose_cfg(["profiler=simple", "profiler.nvtx=false"]).profiler.nvtx is False  # every profiler's key
