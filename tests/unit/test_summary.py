"""A run's record from its ranks' results (rn50/results/summary.py): its figures, and the MFU peak of
the precision option the run built."""

import pytest

from rn50.measure.nvml import FIELDS
from rn50.measure.timing import Window
from rn50.options.components import Options
from rn50.results.summary import summarize
from rn50.wire import RankResult

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


def test_a_run_that_waited_for_its_batches_says_it_is_input_bound(compose_cfg):
    """Steps that waited for their batches over 5% of the windows: the tag, the headline and the sweep report's
    column say so; a run that waited less carries the tag false and no note."""
    from rn50.results import report
    from rn50.results.summary import headline

    cfg = compose_cfg(["bench.warmup_steps=1", "bench.steps=4", "bench.repeats=1"])
    options = Options.of(cfg)
    starved, fed = rank_zero(4, 0.1, 256), rank_zero(4, 0.1, 256)
    starved.windows[0].wait_s = 0.08  # 20% of its 0.4 s window
    fed.windows[0].wait_s = 0.004  # 1%
    records = [summarize(cfg, [r], 0.0, 10.0, options) for r in (starved, fed)]
    assert [r.tags["input_bound"] for r in records] == ["true", "false"]
    line = headline("amp-1n1g", records[0].metrics)
    assert "; input-bound: its steps waited for their batches 20.0% of the windows (over 5%)" in line
    assert "input-bound" not in headline("amp-1n1g", records[1].metrics)

    rows = [{"gpus": 1, "accelerator": "cuda", "input_bound": "yes" if r.tags["input_bound"] == "true" else "no",
             "data_wait_pct": r.metrics["data/wait_pct"]} for r in records]
    header = [h.strip() for h in report.markdown(rows).splitlines()[0].strip("|").split("|")]
    assert "input-bound" in header
    rows[0]["input_bound"] = "no"  # no point bounded by its input: no column
    assert "input-bound" not in report.markdown(rows)


def test_a_run_whose_network_changed_says_so_in_its_headline_and_tag(compose_cfg):
    """Two ranks that timed their all-reduce before the warm-up and after the windows: a change of a
    third, a sixth of a step, is named in the headline and tagged; a steady network is tagged false."""
    import dataclasses

    from rn50.results.summary import headline

    cfg = compose_cfg(["bench.warmup_steps=1", "bench.steps=4", "bench.repeats=1"])
    options = Options.of(cfg)

    def run(before_ms, after_ms):
        ranks = [dataclasses.replace(rank_zero(4, 0.09, 256), rank=k, allreduce_bytes=102_000_000,
                                     allreduce_ms=after_ms, allreduce_before_ms=before_ms) for k in (0, 1)]
        return summarize(cfg, ranks, 0.0, 10.0, options)

    moved, held = run(43.9, 58.3), run(50.0, 51.0)
    assert moved.metrics["comm/allreduce_change_pct"] == pytest.approx(100 * (58.3 - 43.9) / 43.9)
    assert (moved.tags["network_changed"], held.tags["network_changed"]) == ("true", "false")
    assert "; the network changed during the run: the all-reduce took 43.90 ms before the warm-up and 58.30 ms " \
        "after the windows (+32.8%)" in headline("amp-1n2g", moved.metrics)
    assert "network changed" not in headline("amp-1n2g", held.metrics)


def test_the_start_is_recorded_stage_by_stage_as_rank_zero_marked_it(compose_cfg):
    """time/startup_s from the command's start to rank 0's first step, and its stages (rn50/measure/timing.py)
    from rank 0's marks: a pool rank's, started with the run."""
    cfg = compose_cfg(["bench.warmup_steps=1", "bench.steps=4", "bench.repeats=1"])
    zero = rank_zero(4, 0.1, 256)
    zero.started = dict(preflight=100.5, ranks=103.0, launch=103.1, build=104.0, setup=104.5, ddp=105.5,
                        probe=105.6, data=106.0)
    zero.first_step_at = 107.0
    m = summarize(cfg, [zero], 100.0, 120.0, Options.of(cfg)).metrics
    assert m["time/startup_s"] == 7.0
    assert m["time/startup_preflight_s"] == 0.5 and m["time/startup_ranks_s"] == 2.5
    assert m["time/startup_first_s"] == 1.0
    assert sum(v for k, v in m.items() if k.startswith("time/startup_") and k != "time/startup_s") == pytest.approx(7.0)
