"""data.batch_size=auto: the search against scripted probes (the real probe: tests/integration/test_batch_probe.py)."""

import csv

import pytest

from rn50.rank import batch_search
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
