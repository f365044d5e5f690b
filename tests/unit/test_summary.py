"""A run's record from its ranks' results (rn50/results/summary.py): its figures, and the MFU peak of
the precision option the run built."""

import pytest

from rn50.measure.nvml import FIELDS
from rn50.measure.timing import Window
from rn50.options.components import Options
from rn50.results.summary import RankResult, summarize

GPU = "NVIDIA H100 80GB HBM3"


def rank_zero(steps: int, step_s: float, batch: int) -> RankResult:
    """Rank 0 of a run on the GPU above: one window of `steps` steps, a falling loss, one NVML sample."""
    sample = (0.0, *[1.0] * len(FIELDS))
    return RankResult(rank=0, node_rank=0, local_rank=0, hostname="node1", pid=1,
                      windows=[Window(steps * step_s, [1000 * step_s] * steps)], samples=[sample], batch_size=batch,
                      env_tags={"gpu_model": GPU}, flops_per_image=12e9,
                      losses=[7.0 - 0.5 * i for i in range(1 + steps)], skipped=[])


def test_mfu_takes_the_peak_of_the_precision_option_handed_in(compose_cfg):
    """The config says fp32 and the option handed in is bf16's: the figure uses the option's peak,
    so a summary that built the precision again from the config would fail here."""
    cfg = compose_cfg(["precision=fp32", "bench.warmup_steps=1", "bench.steps=4", "bench.repeats=1"])
    peaks = cfg.mfu.peaks[GPU]
    assert peaks["bf16"] != peaks["fp32"]
    record = summarize(cfg, [rank_zero(4, 0.1, 256)], 0.0, 10.0, Options.of(compose_cfg(["precision=bf16"])))
    assert record.failure is None
    m = record.metrics
    assert m["throughput/images_per_sec"] == pytest.approx(2560.0)
    assert m["mfu/peak_tflops_per_device"] == peaks["bf16"]
    assert m["mfu_pct"] == pytest.approx(100 * 2560.0 * 12e9 / (peaks["bf16"] * 1e12))
