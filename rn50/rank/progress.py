"""Progress of a run and of a sweep: rank 0's bar or lines through warm-up and measured
steps (rn50/measure/meter.py draws them), and one line per finished sweep point."""

import sys
import time
from typing import Callable, Optional, TextIO

import pytorch_lightning as pl
from torch._dynamo.utils import compile_times, counters

from rn50.console import terminal
from rn50.measure import settings
from rn50.measure.meter import INTERVAL_S, Meter, duration, is_tty, rate_text
from rn50.rank import warm_compile

# Torch's timer of inductor's coordinate descent tuning (model.autotune_coordinate_descent): before torch
# warm_compile.FIXED a warm start tunes again, for about a minute, unless the static launcher is off and the
# kernels load in the rank's own process (rn50/rank/warm_compile.py); a few seconds are tuned even then
# (1.2 s of experiment=fastest's on an H200), which the note leaves out.
RETUNING, RETUNED_S = "CachingAutotuner.coordinate_descent_tuning", 5.0


class Progress(pl.Callback):
    """Rank 0's progress through the warm-up, measured and profiled steps of a run.

    It never adds a device sync, inside the measured window or out: it reads only the
    host clock (time.perf_counter) at each step's end and never touches a tensor. The
    host enqueues a step's kernels and moves on, running ahead of the GPU by at most a
    bounded queue of launches (a blocking allocation or the next window edge stops it),
    so the host's rate over many steps matches the device's within a few steps' time.
    It shows "~" images/sec from the start of measuring; the figure rn50 reports is the
    Benchmark callback's, timed between synchronized window edges. Put this callback
    after Benchmark, whose edge sync then happens before this reads the clock.

    Each phase's line has a heartbeat (rn50/measure/meter.py): a step that takes minutes, as a first
    step does while cuDNN autotunes or torch.compile compiles, or any step on a slow CPU, still
    shows the time going by. heartbeat=False is for tests that drive a fake clock.
    """

    def __init__(self, total_warmup: int, total_measured: int, batch_size: int, world_size: int,
                 total_after: int = 0, stream: Optional[TextIO] = None,
                 clock: Callable[[], float] = time.perf_counter, tty: Optional[bool] = None,
                 interval_s: float = INTERVAL_S, prefix: str = "rn50:", heartbeat: bool = True,
                 compiling: bool = False, timers_to: Optional[TextIO] = None):
        self.phases = [(f"{prefix} warm-up", total_warmup), (f"{prefix} measuring", total_measured)]
        self.prefix = prefix
        # torch.compile compiles in the first step: say so while it runs, and what it found cached after
        self.compiling = compiling
        self._cache_counts, self._compile_seconds = (0, 0), None  # None: no timers line to write
        # where torch's compile timers go: the rank's log (its stderr) unless given. Not self.log: Lightning
        # sets that on every callback (its LightningModule.log)
        self.timers_to = timers_to
        if total_after:
            self.phases.append((f"{prefix} profiling", total_after))
        self.images_per_step = batch_size * world_size
        self.stream = stream if stream is not None else terminal()  # a rank's console, not its log
        self.clock, self.tty, self.interval_s = clock, tty, interval_s
        self.heartbeat = heartbeat
        self.meter: Optional[Meter] = None
        self.phase = self.in_phase = 0
        self.measure_start = 0.0
        self.enabled, self.begun = True, False

    def _start(self, phase: int) -> None:
        self.phase, self.in_phase = phase, 0
        self.meter = None
        if phase < len(self.phases):
            label, total = self.phases[phase]
            self.meter = Meter(label, total, "steps", self.stream, self.clock, self.tty, self.interval_s,
                               heartbeat=self.heartbeat)
        if phase == 1:
            self.measure_start = self.clock()
        if phase == 0 and self.compiling and self.meter is not None:
            self.meter.note = compiling_note()  # the heartbeat's lines carry it until the first step ends
            self._cache_counts = cache_counts()  # a warm rank compiled earlier runs' graphs too
            self._compile_seconds = compile_seconds()

    def _rate(self) -> str:
        elapsed = self.clock() - self.measure_start
        return f"~{rate_text(self.in_phase * self.images_per_step / elapsed)}" if elapsed > 0 else ""

    def setup(self, trainer, pl_module, stage) -> None:
        """The warm-up's line starts with the fit: before the first step, Lightning wraps the model
        for DDP and builds the data pipeline and fetches its first batch (DALI takes seconds)."""
        self.on_train_start(trainer, pl_module)

    def on_train_start(self, trainer, pl_module) -> None:
        if self.begun:
            return
        self.begun, self.enabled = True, trainer.is_global_zero
        if self.enabled:
            self._start(0 if self.phases[0][1] else 1)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if not self.enabled or self.meter is None:
            return
        self.in_phase += 1
        measuring = self.phase == 1
        if self.compiling and self.phase == 0 and self.in_phase == 1:
            hits, misses = (now - before for now, before in zip(cache_counts(), self._cache_counts))
            print(f"{self.prefix} {compiled_line(self.clock() - self.meter.started, hits, misses)}", file=self.stream,
                  flush=True)
            self._log_timers(all_cached=hits > 0 and not misses)
        if self.in_phase < self.meter.total:
            self.meter.update(self.in_phase, self._rate() if measuring else "")
            return
        self.meter.done = self.in_phase
        self.meter.finish(self._rate() if measuring else "")
        self._start(self.phase + 1)

    def _log_timers(self, all_cached: bool = False) -> None:
        """Once a run, at the first step's end or at the run's if that never came (a compile that
        failed or was stopped is when it helps most). all_cached: the first step's graphs all came
        from the cache."""
        if self._compile_seconds is not None:
            print(f"{self.prefix} {timers_line(self._compile_seconds, compile_seconds(), all_cached)}",
                  file=self.timers_to or sys.stderr, flush=True)
            self._compile_seconds = None

    def on_train_end(self, trainer, pl_module) -> None:
        self._log_timers()
        if self.enabled and self.meter is not None:  # stopped early: close the line
            self.meter.finish()
            self.meter = None

    def on_exception(self, trainer, pl_module, exception) -> None:
        """A failed run: the line says where it stopped, and its heartbeat stops with it (a pool's
        rank lives on after the run)."""
        self.on_train_end(trainer, pl_module)


def compiling_note() -> str:
    # Not "seconds" once cached: loading experiment=fastest's graphs took 46 s on one H100 and 83 s on
    # four (docs/benchmarks.md, "experiment=fastest on 4 GPUs").
    return (f"compiling (torch.compile: minutes the first time these settings run, fewer once cached in "
            f"{settings.compile_cache_dir()})")


def cache_counts() -> tuple:
    """Inductor's own counts of its FX graph cache in this process so far: (hits, misses)."""
    return counters["inductor"]["fxgraph_cache_hit"], counters["inductor"]["fxgraph_cache_miss"]


def compiled_line(seconds: float, hits: int, misses: int) -> str:
    """'first step, with the compile, in 4 min 51 s: 14 graphs compiled and cached in DIR', or '...: 14
    graphs loaded from the cache in DIR': what the first step's compile found in inductor's FX graph cache."""
    where = settings.compile_cache_dir()
    if hits and not misses:
        what = f"{hits} graph{'s' * (hits != 1)} loaded from the cache in {where}"
    elif misses and not hits:
        what = f"{misses} graph{'s' * (misses != 1)} compiled and cached in {where}"
    elif hits:
        what = f"{hits} graph(s) loaded from the cache in {where}, {misses} compiled"
    else:
        what = f"no graph went through inductor's FX graph cache in {where}"
    return f"first step, with the compile, in {duration(seconds)}: {what}"


def compile_seconds() -> dict:
    """torch's own compile timers in this process so far (torch._dynamo.utils.compile_times, which sums
    each timed function over the graphs): seconds by function name; {} where torch's format is not the
    one read here, since a diagnostic must not fail the run."""
    try:
        names, values = compile_times(repr="csv", aggregate=True)
        return {name: float(value) for name, value in zip(names, values)}
    except (TypeError, ValueError):
        return {}


def timers_line(before: dict, after: dict, all_cached: bool = False) -> str:
    """The first step's share of torch's compile timers, every one of 0.1 s or more, the largest first.
    They include dynamo's tracing, the backend (AOTAutograd, inductor's code generation and compile),
    loading the compiled kernels, the kernel tuning's benchmarks and the CUDA-graph recording, where
    torch times them; many nest inside others, so they do not add up. all_cached: every graph came
    from the cache, so kernel tuning that still ran is torch's, not these settings' first compile."""
    spent = {name: after[name] - before.get(name, 0.0) for name in after}
    largest_first = sorted(spent, key=lambda name: (spent[name], name), reverse=True)
    shown = ", ".join(f"{name} {spent[name]:.1f}" for name in largest_first if spent[name] >= 0.1)
    line = f"torch.compile's timers in the first step, seconds (nested): {shown or 'none ran'}"
    retuned = spent.get(RETUNING, 0.0)
    if all_cached and retuned >= RETUNED_S and warm_compile.torch_retunes():
        # 44.8 of a warm 2-GPU experiment=fastest's 62 s first step on torch 2.11 (docs/benchmarks.md, issue 42)
        line += (f". Coordinate descent tuned kernels again for {retuned:.1f} s though every graph came from "
                 f"the cache: torch {warm_compile.torch_version} does not read its results back on its own "
                 f"(pytorch/pytorch#172819; torch {warm_compile.FIXED} and later do). rn50 loads a rank's "
                 f"kernels in its own process, which keeps them, once a run of the same settings has finished "
                 f"on its GPU (rn50/rank/warm_compile.py)")
    return line


class EpochProgress(pl.Callback):
    """Rank 0's progress through a train=accuracy run: on a terminal a bar over each epoch's
    steps with its running loss and the last top-1; elsewhere one line per finished epoch, and
    within an epoch that runs longer, a line at least every 10 s (the meter's heartbeat).

    `record` is the run's EpochRecord (rn50/rank/training.py), which closes an epoch before this
    callback's on_train_epoch_end. The running loss is read only when a step's end writes the line."""

    def __init__(self, epochs: int, record, stream: Optional[TextIO] = None, tty: Optional[bool] = None,
                 prefix: str = "rn50:", heartbeat: bool = True):
        self.epochs, self.record, self.prefix, self.heartbeat = epochs, record, prefix, heartbeat
        self.stream = stream if stream is not None else terminal()
        self.tty = is_tty(self.stream) if tty is None else tty
        self.meter: Optional[Meter] = None
        self.enabled = True

    def _top1(self) -> str:
        tops = [r["val/top1"] for r in self.record.history if "val/top1" in r]
        return f"top-1 {100 * tops[-1]:.2f}%" if tops else ""

    def on_train_start(self, trainer, pl_module) -> None:
        self.enabled = trainer.is_global_zero

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        if self.enabled:  # off a terminal the epoch's own line is on_train_epoch_end's
            self.meter = Meter(f"{self.prefix} epoch {trainer.current_epoch + 1}/{self.epochs}",
                               trainer.num_training_batches, "steps", self.stream, tty=self.tty,
                               heartbeat=self.heartbeat, announce=self.tty)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self.meter is None:
            return
        due = self.meter.clock() - self.meter.last >= self.meter.interval_s
        # outputs["loss"] is on the device: read it (a sync) only when the line is written.
        loss = f"loss {float(outputs['loss']):.3f}" if due and outputs is not None else ""
        self.meter.update(batch_idx + 1, ", ".join(filter(None, [loss, self._top1()])))

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        meter, self.meter = self.meter, None
        if meter is None:  # not rank 0
            return
        if not self.record.history:
            meter.stop()
            return
        row = self.record.history[-1]
        parts = [f"loss {row['train/loss']:.3f}"]
        if "val/top1" in row:
            parts.append(f"top-1 {100 * row['val/top1']:.2f}%, top-5 {100 * row['val/top5']:.2f}%")
        parts.append(rate_text(row["train/images_per_sec"]))
        if self.tty:
            meter.done = meter.total
            meter.finish(", ".join(parts))
            return
        meter.stop()
        print(f"{self.prefix} epoch {int(row['epoch'])}/{self.epochs}: {', '.join(parts)}, "
              f"{duration(row['time/epoch_s'])}", file=self.stream, flush=True)

    def on_exception(self, trainer, pl_module, exception) -> None:
        """The epoch's lines stop, its heartbeat's included (a pool's rank lives on after the run)."""
        if self.meter is not None:
            self.meter.stop()
            self.meter = None
