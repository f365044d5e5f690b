"""Energy per image: NVML's energy counter at the window edges, power samples where it is missing
(the report's energy columns: tests/integration/test_report.py)."""

import math
import time

import pytest

from rn50.measure import nvml
from rn50.measure.nvml import FIELDS, energy_metrics, integrate_power

POWER = 1 + FIELDS.index("power_w")


class Clock:
    """A clock the test moves by hand, so the sampled span has an exact length."""

    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def reading(watts):
    values = [math.nan] * len(FIELDS)
    values[POWER - 1] = watts
    return tuple(values)


def test_counter_difference_at_the_edges_is_the_energy():
    counter = iter([5_000_000.0, 5_450_000.0])  # millijoules, at start() and at stop()
    sampler = nvml.Sampler(lambda: reading(300.0), interval_s=0.01, energy_counter=lambda: next(counter))
    sampler.start()
    sampler.stop()
    assert sampler.energy_source == "nvml_counter"
    assert sampler.joules() == pytest.approx(450.0)


@pytest.mark.parametrize("counter", [None, lambda: None, lambda: 7.0])  # none, not supported, stuck
def test_without_a_working_counter_the_power_samples_are_integrated(counter):
    clock = Clock()
    watts = iter([200.0, 400.0, 400.0] + [400.0] * 100)
    sampler = nvml.Sampler(lambda: reading(next(watts)), interval_s=10.0, now=clock, energy_counter=counter)
    sampler.start()
    deadline = time.monotonic() + 5
    while not sampler.samples and time.monotonic() < deadline:  # the first sample, at t = 0
        time.sleep(0.001)
    clock.t += 2.0
    sampler.stop()
    # One sample of 200 W at t=0 held to the end of the 2 s span.
    assert sampler.energy_source == "power_samples"
    assert sampler.joules() == pytest.approx(400.0)


def test_trapezoid_over_samples_with_the_ends_held():
    # 100 W at 0.5 s, 300 W at 1.5 s, window of 2 s: 0.5*100 + (100+300)/2*1 + 0.5*300.
    assert integrate_power([(0.5, 100.0), (1.5, 300.0)], 2.0) == pytest.approx(50 + 200 + 150)
    assert integrate_power([(0.0, 250.0), (1.0, math.nan), (2.0, 250.0)], 2.0) == pytest.approx(500.0)
    assert integrate_power([(3.0, 250.0)], 2.0) is None  # after the window: not counted
    assert integrate_power([], 1.0) is None


def test_no_span_no_energy():
    assert nvml.Sampler(lambda: reading(1.0), 0.1).joules() is None


def test_whole_run_and_per_gpu_figures():
    # Two GPUs, 12,800 images each (batch 128 x 100 steps), 1,600 J and 2,400 J.
    m = energy_metrics({0: 1600.0, 1: 2400.0}, 12_800)
    assert m["energy/joules"] == pytest.approx(4000.0)
    assert m["energy/joules_per_image"] == pytest.approx(4000.0 / 25_600)
    assert m["energy/images_per_joule"] == pytest.approx(25_600 / 4000.0)
    assert m["gpu0/joules_per_image"] == pytest.approx(0.125)
    assert m["gpu1/joules_per_image"] == pytest.approx(0.1875)
    assert m["gpu1/energy_joules"] == 2400.0


def test_per_rank_images_and_missing_figures():
    m = energy_metrics({0: 100.0, 1: None, 2: 300.0}, {0: 1000, 1: 1000, 2: 2000})
    assert "gpu1/joules_per_image" not in m
    assert m["energy/joules_per_image"] == pytest.approx(400.0 / 3000)
    assert energy_metrics({}, 1000) == {}  # a CPU run: no energy metrics at all
