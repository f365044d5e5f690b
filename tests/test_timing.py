"""The timing method checked against a fake clock: where it syncs, what it measures."""

import pytest

from rn50.measure.timing import Window, WindowTimer, percentile, slowest, summarize


class FakeClock:
    """Device marks are host times; each step takes a scripted duration; syncs are counted."""

    def __init__(self, durations):
        self.durations, self.t, self.syncs = list(durations), 0.0, []

    def step(self):
        self.t += self.durations.pop(0)

    def sync(self):
        self.syncs.append(self.t)

    def mark(self):
        return self.t

    def elapsed_ms(self, a, b):
        return (b - a) * 1e3

    def now(self):
        return self.t


def drive(warmup, steps, repeats, durations, waits=None):
    """Each step: wait for input (host time, no device work), then run for its duration."""
    clock = FakeClock(durations)
    timer = WindowTimer(warmup, steps, repeats, clock, now=clock.now)
    for i in range(timer.total_steps):
        clock.t += waits[i] if waits else 0.0
        timer.step_start()
        clock.step()
        timer.step_end()
    return timer, clock


def test_warmup_is_excluded_and_steps_are_timed():
    # 3 slow warm-up steps, then 4 steps of 0.1 s.
    timer, clock = drive(3, 4, 1, [5.0, 1.0, 1.0] + [0.1] * 4)
    (window,) = timer.windows
    assert window.seconds == pytest.approx(0.4)
    assert window.step_ms == pytest.approx([100.0] * 4)


def test_device_is_synced_only_at_window_edges():
    timer, clock = drive(2, 5, 3, [1.0] * 2 + [0.2] * 15)
    assert len(clock.syncs) == 4  # the edges of 3 back-to-back windows
    assert clock.syncs == pytest.approx([2.0, 3.0, 4.0, 5.0])
    assert [len(w.step_ms) for w in timer.windows] == [5, 5, 5]
    assert not timer.measuring


def test_repeats_are_separate_windows():
    timer, _ = drive(1, 2, 2, [9.0, 0.1, 0.1, 0.2, 0.2])
    assert [w.seconds for w in timer.windows] == pytest.approx([0.2, 0.4])
    m = summarize(timer.windows, batch_size=10, world_size=1)
    assert m["throughput/images_per_sec_min"] == pytest.approx(50.0)
    assert m["throughput/images_per_sec_max"] == pytest.approx(100.0)
    assert m["throughput/images_per_sec"] == pytest.approx(75.0)  # median of two


def test_throughput_is_global_batch_times_steps_over_window():
    windows = [Window(seconds=2.0, step_ms=[500.0] * 4)]
    m = summarize(windows, batch_size=256, world_size=8)
    assert m["throughput/images_per_sec"] == pytest.approx(256 * 8 * 4 / 2.0)
    assert m["throughput/images_per_sec_per_device"] == pytest.approx(256 * 4 / 2.0)


def test_step_time_median_and_p90():
    windows = [Window(seconds=5.5, step_ms=[float(x) for x in range(100, 1100, 100)])]
    m = summarize(windows, batch_size=1, world_size=1)
    assert m["step_time/median_ms"] == pytest.approx(550.0)
    assert m["step_time/p90_ms"] == pytest.approx(910.0)
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == pytest.approx(2.5)


def test_slowest_rank_sets_each_window():
    fast = [Window(1.0, [10.0, 10.0]), Window(1.0, [10.0, 10.0])]
    slow = [Window(1.5, [12.0, 9.0]), Window(0.9, [8.0, 11.0])]
    merged = slowest([fast, slow])
    assert [w.seconds for w in merged] == [1.5, 1.0]
    assert merged[0].step_ms == [12.0, 10.0] and merged[1].step_ms == [10.0, 11.0]


def test_input_wait_is_counted_inside_windows_only():
    waits = [3.0, 0.05, 0.0, 0.05, 0.0]  # the warm-up wait is not counted
    timer, _ = drive(1, 4, 1, [1.0] + [0.1] * 4, waits)
    (window,) = timer.windows
    assert window.wait_s == pytest.approx(0.1)
    assert window.seconds == pytest.approx(0.5)
    m = summarize(timer.windows, batch_size=1, world_size=1)
    assert m["data/wait_pct"] == pytest.approx(20.0)
