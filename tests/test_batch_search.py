"""data.batch_size=auto: the search against scripted probes, and the real probe on the CPU."""

import re
import csv

import pytest

from rn50.rank import batch_search
from rn50.launcher.launch import set_num_classes
from rn50.rank.batch_search import NoBatchFits, find_batch


class FakeProbe:
    """images/sec from a curve; batches above `fits` raise CUDA's out-of-memory error (by name,
    as torch.cuda.OutOfMemoryError is matched) or return the OOM marker. Counts the steps it ran."""

    class OutOfMemoryError(RuntimeError):
        pass

    def __init__(self, curve, fits=10**9, steps=13, raise_oom=True):
        self.curve, self.fits, self.steps_per_call, self.raise_oom = curve, fits, steps, raise_oom
        self.calls, self.steps = [], 0

    def __call__(self, batch):
        self.calls.append(batch)
        if batch > self.fits:
            self.steps += 1  # it failed in its first step
            if self.raise_oom:
                raise self.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
            return batch_search.OOM
        self.steps += self.steps_per_call
        return self.curve(batch)


def peaked(at):
    """Rises to a peak at `at`, then falls: the shape images/sec against batch has on a GPU."""
    return lambda b: 1000.0 - abs(b - at) * 0.5 - 100.0 * 64 / b


def test_finds_the_peak_and_reports_every_probe():
    probe = FakeProbe(peaked(640))
    result = find_batch(probe, start=64, max_batch=2048, step_budget=400, steps_per_probe=13)
    rates = {p.batch: p.images_per_sec for p in result.probes}
    assert result.batch == max(rates, key=rates.get)
    assert abs(result.batch - 640) <= 32, [p.batch for p in result.probes]
    assert [p.batch for p in result.probes] == probe.calls  # every probe, in order
    assert all(b % 8 == 0 for b in probe.calls)


def test_out_of_memory_probes_are_recorded_and_the_best_that_fits_wins():
    probe = FakeProbe(lambda b: float(b), fits=700)  # faster with every batch, until memory runs out
    result = find_batch(probe, start=64, max_batch=4096, step_budget=300, steps_per_probe=13)
    assert any(p.images_per_sec is None for p in result.probes)
    assert result.batch <= 700 and result.batch >= 640  # found the memory edge within a multiple or so
    assert all(p.batch <= 700 for p in result.probes if p.images_per_sec is not None)


def test_the_oom_marker_works_like_the_error():
    raised = find_batch(FakeProbe(lambda b: float(b), fits=300), step_budget=200)
    marked = find_batch(FakeProbe(lambda b: float(b), fits=300, raise_oom=False), step_budget=200)
    assert raised.batch == marked.batch and [p.batch for p in raised.probes] == [p.batch for p in marked.probes]


@pytest.mark.parametrize("budget", [13, 40, 65, 104])
def test_the_step_budget_is_never_exceeded(budget):
    probe = FakeProbe(peaked(1000), fits=1500)
    result = find_batch(probe, start=64, max_batch=4096, step_budget=budget, steps_per_probe=13)
    assert probe.steps <= result.steps <= budget
    assert len(result.probes) == budget // 13


def test_a_start_that_does_not_fit_goes_down():
    probe = FakeProbe(lambda b: float(b), fits=20)
    result = find_batch(probe, start=64, max_batch=512, step_budget=200, steps_per_probe=13)
    assert probe.calls[:3] == [64, 32, 16]
    assert result.batch <= 20


def test_stops_doubling_when_the_gain_is_under_one_percent():
    probe = FakeProbe(lambda b: 1000.0 if b >= 128 else 500.0)  # flat from 128 on
    find_batch(probe, start=64, max_batch=4096, step_budget=26 * 13, steps_per_probe=13)
    assert 512 not in probe.calls


def test_nothing_fits():
    with pytest.raises(NoBatchFits, match="batch of 1"):
        find_batch(FakeProbe(lambda b: 1.0, fits=0), start=8, step_budget=1000, steps_per_probe=1, multiple=8)
    with pytest.raises(NoBatchFits, match="within the search's 26 steps"):
        find_batch(FakeProbe(lambda b: 1.0, fits=0), start=64, step_budget=26, steps_per_probe=13)


def test_other_errors_are_not_taken_for_oom():
    def broken(batch):
        raise RuntimeError("cuDNN error: CUDNN_STATUS_EXECUTION_FAILED")

    with pytest.raises(RuntimeError, match="CUDNN_STATUS"):
        find_batch(broken)


def test_metrics_and_csv(tmp_path):
    result = find_batch(FakeProbe(lambda b: float(b), fits=100), start=32, max_batch=512, step_budget=60,
                        steps_per_probe=10)
    m = batch_search.search_metrics(result)
    assert m["data.batch_size_chosen"] == result.batch
    assert m["batch_search/probe_bs32_images_per_sec"] == 32.0
    assert "batch_search/probe_bs128_images_per_sec" not in m  # out of memory: no figure
    assert m["batch_search/steps"] == result.steps == 10 * len(result.probes)
    rows = list(csv.DictReader(open(batch_search.write_csv(tmp_path / "batch_search.csv", result))))
    assert [int(r["batch"]) for r in rows] == [p.batch for p in result.probes]
    assert [r["oom"] for r in rows if r["batch"] == "128"] == ["1"]
    assert sum(int(r["chosen"]) for r in rows) == 1


@pytest.mark.slow
def test_real_probe_on_the_cpu_picks_a_batch_and_frees_the_search(compose_cfg, capsys):
    from rn50.point.validate import validate

    cfg = validate(compose_cfg(["dist.accelerator=cpu", "model=resnet18", "data.image_size=32",
                                "precision=fp32", "data.batch_size=auto"]))
    set_num_classes(cfg)  # as the launcher's preflight does
    # Two probes of one step: batch 2, then 4 (the cap); (2 + 4) / 2 snaps to 4, already probed.
    limits = batch_search.Limits(start=2, max_batch=4, multiple=2, warmup_steps=0, steps=1, step_budget=4)
    result = batch_search.resolve_auto_batch(cfg, "cpu", limits)
    assert [p.batch for p in result.probes] == [2, 4]
    assert cfg.data.batch_size == result.batch and result.batch in (2, 4) and result.steps == 2
    assert all(p.images_per_sec > 0 for p in result.probes)
    lines = capsys.readouterr().err.splitlines()  # pytest's capture is not a terminal: plain lines
    assert lines[0] == "rn50: batch search 0/4 steps" and re.fullmatch(
        rf"rn50: batch search 2/2 steps, \d+ s, batch {result.batch}", lines[-1]), lines
    # A fixed batch is left alone.
    fixed = validate(compose_cfg(["dist.accelerator=cpu", "data.batch_size=4"]))
    assert batch_search.resolve_auto_batch(fixed, "cpu") is None and fixed.data.batch_size == 4


AGREE = """
import sys
from omegaconf import OmegaConf
from rn50.rank.batch_search import agree_on_batch, join_ranks
from rn50.config.schema import Rn50Config
import torch, torch.distributed as dist
cfg = OmegaConf.merge(OmegaConf.structured(Rn50Config), {"dist": {"gpus_per_node": 2, "accelerator": "cpu"}})
join_ranks(cfg, torch.device("cpu"))
rank = dist.get_rank()
chosen = agree_on_batch(10 + rank)  # each rank found another batch; rank 0's wins
from lightning_fabric.utilities.distributed import _init_dist_connection
from pytorch_lightning.plugins.environments import TorchElasticEnvironment
_init_dist_connection(TorchElasticEnvironment(), "gloo")  # what Lightning's DDP does next: a no-op now
print(f"rank {rank} chose {chosen}", flush=True)
dist.destroy_process_group()
"""


@pytest.mark.slow
def test_ranks_join_and_take_rank_0s_batch(tmp_path):
    import os
    import subprocess
    import sys

    from conftest import ROOT

    script = tmp_path / "agree.py"
    script.write_text(AGREE)
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                           str(script)], env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # The two ranks print at once, so their lines can run together on the shared stdout.
    assert sorted(re.findall(r"rank \d chose \d+", proc.stdout)) == ["rank 0 chose 10", "rank 1 chose 10"]
