"""The timing method checked against a fake clock: where it syncs, what it measures."""

import pytest

from rn50.measure import timing
from rn50.measure.timing import Window, WindowTimer, percentile, slowest, throughput_metrics


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
    m = throughput_metrics(timer.windows, batch_size=10, world_size=1)
    assert m["throughput/images_per_sec_min"] == pytest.approx(50.0)
    assert m["throughput/images_per_sec_max"] == pytest.approx(100.0)
    assert m["throughput/images_per_sec"] == pytest.approx(75.0)  # median of two


def test_throughput_is_global_batch_times_steps_over_window():
    windows = [Window(seconds=2.0, step_ms=[500.0] * 4)]
    m = throughput_metrics(windows, batch_size=256, world_size=8)
    assert m["throughput/images_per_sec"] == pytest.approx(256 * 8 * 4 / 2.0)
    assert m["throughput/images_per_sec_per_device"] == pytest.approx(256 * 4 / 2.0)


def test_step_time_median_and_p90():
    windows = [Window(seconds=5.5, step_ms=[float(x) for x in range(100, 1100, 100)])]
    m = throughput_metrics(windows, batch_size=1, world_size=1)
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
    m = throughput_metrics(timer.windows, batch_size=1, world_size=1)
    assert m["data/wait_pct"] == pytest.approx(20.0)


def drive_counting(timer, clock, steps):
    """Runs `steps` steps; each sync is recorded with the number of steps run before it."""
    ran = [0]
    clock.sync = lambda: clock.syncs.append(ran[0])
    for _ in range(steps):
        clock.step()
        ran[0] += 1
        timer.step_end()
    return timer


def test_syncs_fall_on_window_edges_only_with_or_without_edge_work():
    # warm-up 3, windows of 4 steps, 3 repeats: the edges follow steps 3, 7, 11 and 15.
    for on_edge in (None, lambda k: None):
        clock = FakeClock([0.1] * 15)
        timer = WindowTimer(3, 4, 3, clock, now=clock.now, on_edge=on_edge)
        drive_counting(timer, clock, timer.total_steps)
        assert set(clock.syncs) == {3, 7, 11, 15}
        # one sync per edge; edge work is followed by one more before a window opens
        assert len(clock.syncs) == (4 if on_edge is None else 7)
        assert [len(w.step_ms) for w in timer.windows] == [4, 4, 4]


def test_edge_work_is_in_no_window_and_sees_the_closed_windows():
    clock = FakeClock([1.0, 1.0] + [0.5] * 6)
    seen = []

    def at_edge(k):
        seen.append((k, len(timer.windows), clock.t))
        clock.t += 100.0  # slow work at the edge: reading the loss, an energy counter, a capture

    timer = WindowTimer(2, 3, 2, clock, now=clock.now, on_edge=at_edge)
    for _ in range(timer.total_steps):
        clock.step()
        timer.step_end()
    assert [(k, n) for k, n, _ in seen] == [(0, 0), (1, 1), (2, 2)]
    assert [w.seconds for w in timer.windows] == pytest.approx([1.5, 1.5])
    assert [w.step_ms for w in timer.windows] == [pytest.approx([500.0] * 3)] * 2


def test_steps_past_the_last_window_and_a_timer_without_warmup():
    clock = FakeClock([0.1] * 12)
    timer = WindowTimer(2, 3, 2, clock, now=clock.now)
    drive_counting(timer, clock, 12)  # 4 steps more than it times
    assert clock.syncs == [2, 5, 8]
    assert len(timer.windows) == 2 and not timer.measuring
    with pytest.raises(ValueError, match="1 or more warm-up steps"):
        WindowTimer(0, 3, 1, clock)


class QueueClock:
    """A host that takes `host_s` to queue a step's kernels and a device that takes `device_s` to run
    them, starting as soon as the first is queued: the device lags behind the host, or waits for it
    and ends the step right after the host queued its last kernel, as on a GPU."""

    cuda = True

    def __init__(self, host_s, device_s):
        self.host_s, self.device_s = list(host_s), list(device_s)
        self.host = self.device = 0.0  # the host's clock; when the device finishes what is queued

    def step(self):
        self.host += self.host_s.pop(0)
        self.device = max(self.device + self.device_s.pop(0), self.host)

    def sync(self):
        self.host = max(self.host, self.device)

    def mark(self):
        return max(self.device, self.host)  # a mark is reached once the work before it is done

    def elapsed_ms(self, a, b):
        return (b - a) * 1e3

    def now(self):
        return self.host


def test_host_lead_says_whether_the_host_kept_ahead():
    # The host queues a step in 10 ms; the device runs it in 40: the host gets further ahead each step.
    clock = QueueClock([0.01] * 6, [0.04] * 6)
    timer = WindowTimer(1, 5, 1, clock, now=clock.now)
    for _ in range(timer.total_steps):
        clock.step()
        timer.step_end()
    (window,) = timer.windows
    assert window.lead_ms == pytest.approx([30.0, 60.0, 90.0, 120.0, 150.0])
    m = throughput_metrics(timer.windows, batch_size=1, world_size=1)
    assert m["host/lead_min_ms"] == pytest.approx(30.0) and m["host/bound_steps_pct"] == 0
    # A host that takes 50 ms per step: the device waits for each one, and the host's lead is nil.
    clock = QueueClock([0.05] * 6, [0.04] * 6)
    timer = WindowTimer(1, 5, 1, clock, now=clock.now)
    for _ in range(timer.total_steps):
        clock.step()
        timer.step_end()
    m = throughput_metrics(timer.windows, batch_size=1, world_size=1)
    assert m["host/bound_steps_pct"] == 100.0
    assert throughput_metrics([Window(1.0, [10.0])], 1, 1).keys().isdisjoint({"host/lead_min_ms"})  # no lead on a CPU


@pytest.mark.parametrize("wait,busy,bound", [
    (20.0, None, True),  # a CPU run: no GPU busy share, the wait alone says it
    (84.1, 89.7, True),  # data=dali under experiment=fastest at 0.86 of synthetic (H200, issue 14)
    (79.2, 23.6, True),  # data=imagefolder, 8 workers, at 0.24 of synthetic
    (72.3, 99.4, False),  # the same preset with data=dali at 0.992: the host ran ahead of a busy GPU (issue 44)
    (9.1, 98.0, False),  # data=dali at the defaults, 0.98 of synthetic
    (4.0, 50.0, False),  # waited too little to say
])
def test_a_run_is_input_bound_when_it_waited_and_its_gpus_had_time_to_spare(wait, busy, bound):
    metrics = {"data/wait_pct": wait, **({} if busy is None else {"gpu/utilization_pct": busy})}
    assert timing.input_bound(metrics) is bound
    note = timing.input_bound_note(metrics)
    assert bool(note) is bound
    if bound and busy is not None:
        assert note.endswith(f"(over 5%), its GPUs busy {busy:.1f}% (under 95%)")


def test_the_start_splits_into_stages_that_add_up_to_it():
    # a pool rank that started with the run: every stage, each the gap from the one before
    reached = dict(preflight=101.0, ranks=104.0, launch=104.5, build=106.0, setup=107.0, ddp=109.5, probe=110.0,
                   data=111.0)
    stages = timing.startup_stages(100.0, reached, first_step_at=113.0)
    assert stages == {"time/startup_preflight_s": 1.0, "time/startup_ranks_s": 3.0, "time/startup_launch_s": 0.5,
                      "time/startup_build_s": 1.5, "time/startup_setup_s": 1.0, "time/startup_ddp_s": 2.5, "time/startup_probe_s": 0.5,
                      "time/startup_data_s": 1.0, "time/startup_first_s": 2.0}
    assert sum(stages.values()) == 13.0  # time/startup_s


def test_a_warm_rank_or_one_torchrun_started_has_no_ranks_stage():
    reached = dict(preflight=40.0, ranks=50.0, launch=100.5, build=101.0, setup=101.0, ddp=101.5, probe=101.5,
                   data=102.0)
    warm = timing.startup_stages(100.0, reached, first_step_at=103.0)  # ready long before this sweep point
    assert "time/startup_ranks_s" not in warm and "time/startup_preflight_s" not in warm
    assert warm["time/startup_launch_s"] == 0.5
    assert sum(warm.values()) == 3.0
    torchrun = timing.startup_stages(100.0, dict(reached, preflight=None, ranks=None), first_step_at=103.0)
    assert torchrun == warm
    # a stage a rank did not mark joins the next: without the probe's mark, its time is the data stage's
    del reached["probe"]
    assert timing.startup_stages(100.0, reached, 103.0)["time/startup_data_s"] == 0.5
