"""How a rank builds its Trainer."""

from conftest import TINY
from rn50.measure import Benchmark
from rn50.schema import validate
from rn50.worker import build_trainer


def test_trainer_has_no_per_step_sigterm_sync(compose_cfg, tmp_path):
    cfg = validate(compose_cfg(TINY + ["dist=1n2g", "bench.repeats=3"]))
    trainer = build_trainer(cfg, "cpu", Benchmark(cfg.bench, cfg.telemetry, "cpu"), tmp_path)
    loop = trainer.fit_loop.epoch_loop
    # Lightning's method would broadcast and .item() every DDP step; the instance's own replaces it.
    assert "_broadcast_sigterm_tensor" in vars(loop) and loop._broadcast_sigterm_tensor() is None
    assert trainer.max_steps == cfg.bench.warmup_steps + 3 * cfg.bench.steps
    assert trainer.logger is None and not trainer.checkpoint_callback
