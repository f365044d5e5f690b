"""torch 2.11's warm start with kernel tuning (rn50/rank/warm_compile.py): a GPU-only path, its logic here.
On 4 H200s the warm experiment=fastest tuned again for 68.8 s with only the static launcher off, 1.2 s with
one compile thread too (issue 42, thirteenth session)."""

import pytest
from torch._inductor import config as inductor
from torch.torch_version import TorchVersion

from rn50.point.validate import validate
from rn50.rank import warm_compile

FAST = ["experiment=fastest", "dist.accelerator=gpu"]
H200 = "NVIDIA H200 cuda:0"


@pytest.fixture
def on_a_gpu(monkeypatch, tmp_path):
    """A GPU host with torch 2.11 as far as warm_compile can tell; inductor's settings and the compile
    cache are the test's own."""
    monkeypatch.setattr(warm_compile.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(warm_compile, "torch_version", TorchVersion("2.11.0+cu130"))
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("use_static_cuda_launcher", "compile_threads"):
        monkeypatch.setattr(inductor, name, getattr(inductor, name))  # put back after the test
    # torch's own settings on a GPU host with 8 compile threads
    monkeypatch.setattr(warm_compile, "TORCH_OWN", {"use_static_cuda_launcher": True, "compile_threads": 8})
    return tmp_path / "cache"


def test_a_rank_loads_in_process_only_once_its_settings_compiled(on_a_gpu, compose_cfg):
    cfg = validate(compose_cfg(FAST))
    assert warm_compile.prepare(cfg, H200) is False  # first run: compiles in parallel, as torch would
    assert inductor.use_static_cuda_launcher is False
    assert inductor.compile_threads == warm_compile.TORCH_OWN["compile_threads"] == 8
    warm_compile.remember(cfg, H200)
    assert [p.parent.name for p in on_a_gpu.rglob("*") if p.is_file()] == [warm_compile.MARKS]
    assert warm_compile.prepare(cfg, H200) is True and inductor.compile_threads == 1
    assert inductor.use_static_cuda_launcher is False  # part of the FX graph cache's key: the same both times


@pytest.mark.parametrize("other,warm", [
    (["data.batch_size=256"], False),  # another graph
    (["precision=bf16"], False),
    (["model.compile_ddp=no_optimization"], False),
    (["dist=1n2g"], False),
    (["bench.repeats=5"], True),  # the same graphs: more windows
    (["telemetry.interval_s=0.5"], True),
])
def test_the_mark_is_of_settings_that_change_the_graphs(on_a_gpu, compose_cfg, other, warm):
    warm_compile.remember(validate(compose_cfg(FAST)), H200)
    assert warm_compile.prepare(validate(compose_cfg(FAST + other)), H200) is warm


def test_each_gpu_and_torch_has_its_own_mark(on_a_gpu, compose_cfg, monkeypatch):
    cfg = validate(compose_cfg(FAST))
    warm_compile.remember(cfg, H200)
    assert warm_compile.prepare(cfg, "NVIDIA H200 cuda:1") is False  # a graph names its device
    assert warm_compile.prepare(cfg, "NVIDIA H100 80GB HBM3 cuda:0") is False
    monkeypatch.setattr(warm_compile, "torch_version", TorchVersion("2.11.1"))
    assert warm_compile.prepare(cfg, H200) is False


def test_a_pool_rank_gives_the_next_point_its_own_settings(on_a_gpu, compose_cfg):
    """A warm rank runs a sweep's points one after another in one process (rn50/launcher/pool.py)."""
    warm, cold = validate(compose_cfg(FAST)), validate(compose_cfg(FAST + ["data.batch_size=256"]))
    warm_compile.remember(warm, H200)
    assert warm_compile.prepare(warm, H200) is True and inductor.compile_threads == 1
    assert warm_compile.prepare(cold, H200) is False and inductor.compile_threads == 8  # compiles in parallel
    warm_compile.prepare(warm, H200)
    warm_compile.prepare(validate(compose_cfg(FAST + ["model.autotune_coordinate_descent=false"])), H200)
    assert (inductor.use_static_cuda_launcher, inductor.compile_threads) == (True, 8)  # torch's own again


@pytest.mark.parametrize("overrides", [
    ["data.batch_size=auto"],  # the batch is chosen at run time: the next may compile another
    ["TORCHINDUCTOR_FX_GRAPH_CACHE=0"],  # inductor keeps no graphs
])
def test_no_mark_where_the_graphs_may_not_be_cached(on_a_gpu, compose_cfg, monkeypatch, overrides):
    if overrides[0].startswith("TORCHINDUCTOR"):
        monkeypatch.setattr(inductor, "fx_graph_cache", False)
        overrides = []
    cfg = validate(compose_cfg(FAST + overrides))
    warm_compile.remember(cfg, H200)
    assert warm_compile.prepare(cfg, H200) is False and inductor.compile_threads == 8
    assert inductor.use_static_cuda_launcher is False
    assert not on_a_gpu.exists()


@pytest.mark.parametrize("overrides,torch_version", [
    (FAST, "2.12.0"),  # fixed there
    (FAST, "2.13.0.dev20260101"),
    (FAST + ["model.autotune_coordinate_descent=false"], "2.11.0"),  # nothing to tune again
    (FAST + ["dist.accelerator=cpu", "model.cuda_graphs=false"], "2.11.0"),
    (["dist.accelerator=gpu"], "2.11.0"),  # not compiled
])
def test_elsewhere_torch_keeps_its_own_settings(on_a_gpu, compose_cfg, monkeypatch, overrides, torch_version):
    monkeypatch.setattr(warm_compile, "torch_version", TorchVersion(torch_version))
    cfg = validate(compose_cfg(overrides))
    monkeypatch.setattr(inductor, "use_static_cuda_launcher", False)  # as an earlier point of a pool rank left it
    monkeypatch.setattr(inductor, "compile_threads", 1)
    warm_compile.remember(cfg, H200)
    assert warm_compile.prepare(cfg, H200) is False
    assert (inductor.use_static_cuda_launcher, inductor.compile_threads) == (True, 8)  # torch's own
    assert not on_a_gpu.exists()


def test_a_cache_that_cannot_be_written_keeps_no_mark_and_fails_nothing(on_a_gpu, compose_cfg):
    on_a_gpu.parent.mkdir(exist_ok=True)
    on_a_gpu.write_text("a file where the cache's folder would be")
    cfg = validate(compose_cfg(FAST))
    warm_compile.remember(cfg, H200)
    assert warm_compile.prepare(cfg, H200) is False
