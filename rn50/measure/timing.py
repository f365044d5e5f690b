"""Timing math: measured windows, per-step durations and their statistics, and model FLOPs
utilization (achieved model FLOP/s over the GPU's peak for the math mode).

The method: skip `warmup` steps, then time `repeats` windows of `steps` steps
each. The device is synchronized only at window edges; inside a window each
step boundary is marked on the device timeline (a CUDA event, no sync) and the
marks are read after the window. On a CPU the marks are host clock readings.
`WindowTimer` is the method's one home: a rank's ThroughputCallback, the bare loop
(rn50/tools/baseline.py) and the batch search (rn50/rank/batch_search.py) all time with it.
"""

import csv
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence


@dataclass
class Window:
    seconds: float
    """Host wall time between the synchronized edges."""
    step_ms: List[float]
    """Device time between consecutive step boundaries."""
    wait_s: float = 0.0
    """Host time spent between a step's end and the next step's start: waiting for input."""
    lead_ms: List[float] = field(default_factory=list)
    """For each step, how long after the host had queued its end the device reached it: how far the
    host ran ahead. Near 0 the device had caught up and waited for the host. Empty on a CPU."""


@dataclass
class WindowTimer:
    """Turns step-end callbacks into measured windows.

    Window k covers the steps after boundary k and up to boundary k+1, where the
    boundaries fall after steps warmup-1, warmup-1+steps, ... (0-based).
    Call `step_end()` after every step (and `step_start()` once its input is in hand, to count
    input wait); run `total_steps` steps.

    `on_edge(k)` is called at edge k (0 opens the first window, `repeats` closes the last), after
    the sync and after window k-1 is in `windows`: there the host may read what the sync made
    ready (the loss, an energy counter) or do untimed work. The next window opens after it, at
    a fresh mark and sync, so that work is in no window.
    """

    warmup: int
    steps: int
    repeats: int
    clock: Any
    now: Callable[[], float] = time.perf_counter
    on_edge: Optional[Callable[[int], None]] = None
    windows: List[Window] = field(default_factory=list)
    _marks: List[Any] = field(default_factory=list)
    _queued: List[float] = field(default_factory=list)  # the host clock at each mark
    _started: float = 0.0
    _step: int = 0
    _wait: float = 0.0
    _last_end: float = 0.0

    def __post_init__(self):
        if min(self.warmup, self.steps, self.repeats) < 1:  # the first edge follows a step
            raise ValueError(f"a window timer needs 1 or more warm-up steps, steps and repeats, not "
                             f"{self.warmup}, {self.steps} and {self.repeats}")

    @property
    def total_steps(self) -> int:
        return self.warmup + self.steps * self.repeats

    @property
    def measuring(self) -> bool:
        return bool(self._marks)

    def step_start(self) -> None:
        """Called once the step's batch is in hand: the time since the last step ended was input wait."""
        if self._marks:
            self._wait += self.now() - self._last_end

    def step_end(self) -> None:
        step, self._step = self._step, self._step + 1
        offset = step - (self.warmup - 1)
        if 0 <= offset <= self.steps * self.repeats:
            self._mark(at_edge=offset % self.steps == 0)
        self._last_end = self.now()

    def _mark(self, at_edge: bool) -> None:
        mark, queued = self.clock.mark(), self.now()
        if not at_edge:
            self._marks.append(mark)
            self._queued.append(queued)
            return
        # A window edge: the only place the host waits for the device.
        self.clock.sync()
        t = self.now()
        if self._marks:
            self._marks.append(mark)
            self._queued.append(queued)
            ms = [self.clock.elapsed_ms(a, b) for a, b in zip(self._marks, self._marks[1:])]
            self.windows.append(Window(t - self._started, ms, self._wait, self._leads(ms)))
            self._marks, self._queued = [], []
        if self.on_edge is not None:
            self.on_edge(len(self.windows))
        if len(self.windows) < self.repeats:
            if self.on_edge is not None:
                self.clock.sync()  # whatever device work the edge queued ends before the window opens
                mark, t = self.clock.mark(), self.now()
            self._started, self._marks, self._queued, self._wait = t, [mark], [t], 0.0

    def _leads(self, step_ms: List[float]) -> List[float]:
        """Each step's host lead: the device reached the step's end mark (the window's first mark, made
        on an idle device right after a sync, plus the steps' device times) this long after the host
        had queued it. A clock without a device timeline (the CPU's) has none."""
        if not getattr(self.clock, "cuda", False):
            return []
        device_s, leads = self._queued[0], []
        for ms, queued in zip(step_ms, self._queued[1:]):
            device_s += ms / 1e3
            leads.append(1e3 * (device_s - queued))
        return leads


# A run's start as rank 0 went through it, stage by stage, each named for what ended with it (measure_rank and
# ThroughputCallback mark them). Where rn50's pool started the rank with the run:
#   preflight: the launcher's work before it started the rank's process (Hydra's config, its checks, counting
#     the images of a real data set);
#   ranks: the process's start, its imports (torch, Lightning) and its CUDA context, while the launcher opens the
#     MLflow run;
# a rank still warm from an earlier point of a sweep, or one that torchrun, SLURM or a profiler started, has neither:
#   launch: until the rank holds its run (under torchrun and SLURM, where the command is the rank, all of the
#     above and the MLflow run);
#   build: the CUDA device, the inductor cache, the batch search, the model and the Trainer;
#   setup: Lightning's process group and accelerator;
#   ddp: the module's setup, the model moved and wrapped in DDP (its parameter broadcast);
#   probe: the all-reduce timed before the first step;
#   data: the data loaders or DALI's pipeline built;
#   first: to the first batch in hand (DataLoader workers start here).
# setup, ddp and probe end at collectives: rank 0's share of each includes waiting for the slowest rank.
# Their sum is time/startup_s.
STARTUP_STAGES = ("preflight", "ranks", "launch", "build", "setup", "ddp", "probe", "data", "first")


def startup_stages(started_at: float, reached: Mapping[str, Optional[float]],
                   first_step_at: float) -> Dict[str, float]:
    """time/startup_<stage>_s: the seconds between consecutive stages a rank marked (reached: stage -> the
    wall-clock time it ended, None where it has none, for all but the last, which ends at the first step), from
    the command's start (started_at). A stage the rank did not mark, or ended before the one before it (a warm
    rank, started and ready before the run began), joins the next one."""
    metrics, last = {}, started_at
    ends = {**reached, STARTUP_STAGES[-1]: first_step_at}
    for stage in STARTUP_STAGES:
        if ends.get(stage) is not None and ends[stage] >= last:
            metrics[f"time/startup_{stage}_s"] = ends[stage] - last
            last = ends[stage]
    return metrics


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile, q in [0, 100]."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("percentile of no values")
    pos = (len(ordered) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def slowest(per_rank: Sequence[Sequence[Window]]) -> List[Window]:
    """Merge ranks: each window takes the slowest rank's seconds and the per-step max."""
    merged = []
    for windows in zip(*per_rank):
        merged.append(
            Window(
                seconds=max(w.seconds for w in windows),
                step_ms=[max(s) for s in zip(*(w.step_ms for w in windows))],
                wait_s=max(w.wait_s for w in windows),
                # the rank whose host was furthest behind, step by step
                lead_ms=[min(s) for s in zip(*(w.lead_ms for w in windows))],
            )
        )
    return merged


def throughput_metrics(windows: Sequence[Window], batch_size: int, world_size: int) -> Dict[str, float]:
    """Throughput and step-time metrics, named with their units."""
    per_window = window_images_per_sec(windows, batch_size, world_size)
    steps_ms = [ms for w in windows for ms in w.step_ms]
    median = statistics.median(per_window)
    return {
        "throughput/images_per_sec": median,
        "throughput/images_per_sec_per_device": median / world_size,
        "throughput/images_per_sec_mean": statistics.fmean(per_window),
        "throughput/images_per_sec_min": min(per_window),
        "throughput/images_per_sec_max": max(per_window),
        "throughput/images_per_sec_std": statistics.pstdev(per_window),
        "step_time/median_ms": statistics.median(steps_ms),
        "step_time/p90_ms": percentile(steps_ms, 90),
        "step_time/mean_ms": statistics.fmean(steps_ms),
        "window/seconds_total": sum(w.seconds for w in windows),
        "data/wait_pct": 100.0 * sum(w.wait_s for w in windows) / sum(w.seconds for w in windows),
        **host_lead(windows),
    }


# A run whose steps waited for their batches longer than this share of its windows, while its GPUs
# had time to spare, is input-bound: its tag, its headline and its sweep report row say so, for a user
# sizing a node's CPUs and input pipeline. Synthetic data waits well under 1%; data=dali under
# experiment=fastest at 0.86 of synthetic waited 84% with its GPU 90% busy (its levers: 79 to 90%).
# A wait alone is not enough: where the host runs steps ahead of its GPU (CUDA graphs), it waits on
# batches that queue behind the GPU's own work, and the same preset at 0.992 of synthetic waited 72%
# with its GPU 99.4% busy (docs/benchmarks.md, issue 44). Runs that waited 9 to 22% at 96 to 98% busy
# trained at 0.96 to 0.98 of synthetic: about what the GPU's spare time says.
INPUT_BOUND_WAIT_PCT = 5.0
INPUT_BOUND_GPU_BUSY_PCT = 95.0


def input_bound(metrics: Mapping[str, float]) -> bool:
    """Whether a run's metrics make it input-bound: data/wait_pct over INPUT_BOUND_WAIT_PCT, with its
    GPUs busy under INPUT_BOUND_GPU_BUSY_PCT where that was measured (gpu/utilization_pct; not on CPUs)."""
    wait_pct, gpu_busy_pct = metrics.get("data/wait_pct"), metrics.get("gpu/utilization_pct")
    return (wait_pct is not None and wait_pct > INPUT_BOUND_WAIT_PCT
            and (gpu_busy_pct is None or gpu_busy_pct < INPUT_BOUND_GPU_BUSY_PCT))


def input_bound_note(metrics: Mapping[str, float]) -> str:
    """'input-bound: its steps waited for their batches 12.3% of the windows (over 5%), its GPUs busy
    88.0% (under 95%)', or ''."""
    if not input_bound(metrics):
        return ""
    wait_pct, gpu_busy_pct = metrics["data/wait_pct"], metrics.get("gpu/utilization_pct")
    busy = "" if gpu_busy_pct is None else (f", its GPUs busy {gpu_busy_pct:.1f}% "
                                            f"(under {INPUT_BOUND_GPU_BUSY_PCT:g}%)")
    return (f"input-bound: its steps waited for their batches {wait_pct:.1f}% of the windows "
            f"(over {INPUT_BOUND_WAIT_PCT:g}%){busy}")


# A step whose end the device reached within this long of the host queueing it: the device had
# run out of queued work and waited for the host.
HOST_BOUND_MS = 1.0


def host_lead(windows: Sequence[Window]) -> Dict[str, float]:
    """host/lead_median_ms, host/lead_min_ms and host/bound_steps_pct (steps whose lead was under
    HOST_BOUND_MS): whether the host kept ahead of the device. Nothing where no lead was measured."""
    leads = [ms for w in windows for ms in w.lead_ms]
    if not leads:
        return {}
    return {"host/lead_median_ms": statistics.median(leads), "host/lead_min_ms": min(leads),
            "host/bound_steps_pct": 100.0 * sum(ms < HOST_BOUND_MS for ms in leads) / len(leads)}


def window_images_per_sec(windows: Sequence[Window], batch_size: int, world_size: int) -> List[float]:
    return [batch_size * world_size * len(w.step_ms) / w.seconds for w in windows]


def write_steps_csv(path, per_rank: Sequence[Sequence[Window]]) -> None:
    """Every rank's per-step durations: rank, window, step, duration_ms."""
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(("rank", "window", "step", "duration_ms"))
        for rank, windows in enumerate(per_rank):
            for w, window in enumerate(windows):
                out.writerows((rank, w, s, ms) for s, ms in enumerate(window.step_ms))


# Model FLOPs utilization, from the throughput and the FLOPs of one image.
def peak_tflops(mfu_cfg, gpu_name: Optional[str], math_mode: str) -> Optional[float]:
    """The override, else the table entry; None (no MFU) for a GPU or mode not in the table."""
    if mfu_cfg.peak_tflops is not None:
        return float(mfu_cfg.peak_tflops)
    row = mfu_cfg.peaks.get(gpu_name) if gpu_name else None
    return float(row[math_mode]) if row and math_mode in row else None


def mfu_pct(images_per_sec_per_device: float, flops_image: float, peak: float) -> float:
    return 100.0 * images_per_sec_per_device * flops_image / (peak * 1e12)
