"""How a rank builds its Trainer."""

from conftest import TINY
from rn50.measure import Benchmark
from rn50.ncu import NcuRange
from rn50.nvtx import NvtxRanges
from rn50.profile import TorchProfile
from rn50.schema import validate
from rn50.worker import build_trainer, profiling_callbacks


def test_trainer_has_no_per_step_sigterm_sync(compose_cfg, tmp_path):
    cfg = validate(compose_cfg(TINY + ["dist=1n2g", "bench.repeats=3"]))
    trainer = build_trainer(cfg, "cpu", Benchmark(cfg.bench, cfg.telemetry, "cpu"), tmp_path)
    loop = trainer.fit_loop.epoch_loop
    # Lightning's method would broadcast and .item() every DDP step; the instance's own replaces it.
    assert "_broadcast_sigterm_tensor" in vars(loop) and loop._broadcast_sigterm_tensor() is None
    assert trainer.max_steps == cfg.bench.warmup_steps + 3 * cfg.bench.steps
    assert trainer.logger is None and not trainer.checkpoint_callback


def test_profiled_steps_come_after_the_measured_ones(compose_cfg, tmp_path):
    cfg = validate(compose_cfg(TINY + ["profiler=pytorch"]))
    bench = Benchmark(cfg.bench, cfg.telemetry, "cpu")
    trainer = build_trainer(cfg, "cpu", bench, tmp_path)
    assert trainer.max_steps == bench.timer.total_steps + 1 + 2 + 5
    (profile,) = [cb for cb in trainer.callbacks if isinstance(cb, TorchProfile)]
    assert profile.first_step == bench.timer.total_steps


def test_nvtx_ranges_only_on_gpus_and_when_asked(compose_cfg, tmp_path):
    def kinds(overrides, device_type):
        cfg = compose_cfg(TINY + overrides)
        return [type(cb) for cb in profiling_callbacks(cfg, device_type, 3, tmp_path)]

    assert kinds([], "cuda") == [NvtxRanges] and kinds([], "cpu") == []
    assert kinds(["profiler.nvtx=false"], "cuda") == []
    assert kinds(["profiler=ncu"], "cuda") == [NvtxRanges, NcuRange]
