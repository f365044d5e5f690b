"""A counted task's progress: a bar redrawn in place on a terminal, plain lines elsewhere.

On a terminal (the stream is a TTY) one line is redrawn with a carriage return. Anywhere
else (CI, SLURM logs, a file) a plain line is printed when the task starts, at most every
`interval_s` seconds while it runs, and when it ends, so a log stays short. With a heartbeat,
the line also comes when no item ends for a while: off a terminal at least every `interval_s`,
on one each second, so the elapsed time moves through a step that takes minutes (cuDNN's
autotuning, a compile, a slow CPU). No imports beyond the standard library, so light tools
(rn50.fake_imagenet) start fast.
"""

import sys
import threading
import time
from typing import Any, Callable, Mapping, Optional, TextIO


INTERVAL_S = 10.0  # plain lines: one per phase this often, at most (and at least, with a heartbeat)
REDRAW_S = 0.5  # terminal: at most one redraw this often (a run redraws inside its measured window)
TICK_S = 1.0  # terminal: with a heartbeat, a redraw at least this often, for the elapsed seconds


def rate_text(images_per_sec: float) -> str:
    """11,798 images/sec; 2.4 images/sec below 100, where the decimal still says something."""
    return f"{images_per_sec:,.0f} images/sec" if images_per_sec >= 100 else f"{images_per_sec:.1f} images/sec"


def duration(seconds: float) -> str:
    """12 s, 1 min 40 s, 2 h 05 min."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


class Meter:
    """Progress of one counted task ("warm-up 12/20 steps, 40 s, ~30 s left") on a stream.

    Each line after the first gives the time since the task started; the time left appears
    once two items have ended. heartbeat=True starts a daemon thread that writes the line
    whenever none was written for a while, until finish() or stop(); it reads the host clock
    only. announce=False leaves out the first line, written when the meter is made.
    clock and stream are injectable so a test can drive a meter with a fake clock (without a
    heartbeat, whose waits are real); tty=None asks the stream whether it is a terminal.
    """

    def __init__(self, label: str, total: int, unit: str = "steps", stream: Optional[TextIO] = None,
                 clock: Callable[[], float] = time.monotonic, tty: Optional[bool] = None,
                 interval_s: float = INTERVAL_S, width: int = 24, heartbeat: bool = False, announce: bool = True):
        self.label, self.total, self.unit, self.width = label, total, unit, width
        self.stream = stream if stream is not None else sys.stderr
        self.tty = is_tty(self.stream) if tty is None else tty
        self.clock, self.interval_s = clock, (REDRAW_S if self.tty else interval_s)
        self.started = self.last = clock()
        self.done, self._drawn, self.note = 0, 0, ""
        self._first: Optional[tuple] = None  # (done, time) at the first update that counted any
        self._last: Optional[tuple] = None  # (done, time) when the count last moved
        self.finished = False
        self._lock = threading.Lock()  # the heartbeat writes from its own thread
        self._stop = threading.Event()
        if announce:  # the line that says the task started
            self._write(self._line("", opening=True), force=True)
        self.heartbeat: Optional[threading.Thread] = None  # ends soon after finish()
        if heartbeat:
            beat_s = TICK_S if self.tty else interval_s
            self.heartbeat = threading.Thread(target=self._beat, args=(beat_s,), name="rn50-heartbeat", daemon=True)
            self.heartbeat.start()

    def update(self, done: int, note: str = "") -> None:
        """done of total so far; note is appended (e.g. the current images/sec)."""
        if done != self.done:
            self._last = (done, self.clock())
        self.done, self.note = done, note
        if self._first is None and done > 0:
            self._first = self._last
        if self.clock() - self.last >= self.interval_s:
            self._write(self._line(note))

    def stop(self) -> bool:
        """No more lines, the heartbeat's included; False if it had stopped already."""
        with self._lock:
            stopping, self.finished = not self.finished, True
            self._stop.set()
        return stopping

    def finish(self, note: str = "") -> None:
        """The phase is over: the last line, with the time it took; a terminal moves to a new line."""
        if not self.stop():
            return
        self._write(self._line(note, final=True), force=True)
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()

    def _beat(self, beat_s: float) -> None:
        """The line again whenever none came for beat_s, until finish()."""
        while not self._stop.wait(max(self.last + beat_s - self.clock(), 0.0)):
            if self.clock() - self.last >= beat_s:
                self._write(self._line(self.note), due_s=beat_s)

    def _line(self, note: str, final: bool = False, opening: bool = False) -> str:
        count = f"{self.done}/{self.total} {self.unit}"
        parts = [] if opening else [duration(self.clock() - self.started), note]
        # The time left is paced by the items after the first: a run's first step autotunes
        # cuDNN and compiles, and would put minutes on a warm-up that takes seconds.
        # Between items (a heartbeat's line) the clock runs down from the last item's end, to no
        # less than the items after the one under way.
        if not final and self._first is not None and self._first[0] < self.done < self.total:
            (first, first_at), (last, last_at) = self._first, self._last
            per_item, to_go = (last_at - first_at) / (last - first), self.total - self.done
            left = max(per_item * to_go - (self.clock() - last_at), per_item * (to_go - 1))
            parts.append(f"~{duration(left)} left")
        if self.tty:
            filled = self.width * min(self.done, self.total) // max(self.total, 1)
            count = f"[{'#' * filled}{'.' * (self.width - filled)}] {count}"
        return ", ".join(filter(None, [f"{self.label} {count}", *parts]))

    def _write(self, line: str, force: bool = False, due_s: Optional[float] = None) -> None:
        """The line, if forced or none was written for due_s (default: the interval); never after
        the last one, which finish() forces."""
        with self._lock:
            now = self.clock()
            if not force and (self.finished or now - self.last < (self.interval_s if due_s is None else due_s)):
                return
            self.last = now
            if self.tty:  # redraw in place; spaces wipe what a longer previous line left
                self.stream.write("\r" + line + " " * max(self._drawn - len(line), 0))
                self._drawn = len(line)
            else:
                self.stream.write(line + "\n")
            self.stream.flush()


def is_tty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def point_line(index: int, total: int, summary: Mapping[str, Any]) -> str:
    """One sweep point's line: '[3/12] resnet50 amp 1n2g bs256: 11,798 images/sec'.

    index counts from 1. summary: a run's summary.json, or any mapping with arch,
    precision, dist, batch_size (each left out when missing), accelerator (cpu says so) and either
    throughput/images_per_sec or, for a point that failed, failure ('oom', 'config').
    """
    parts = [str(summary[k]) for k in ("arch", "precision", "dist") if summary.get(k) is not None]
    if summary.get("batch_size") is not None:
        parts.append(f"bs{summary['batch_size']}")
    if summary.get("accelerator") == "cpu":  # never taken for a GPU figure
        parts.append("cpu")
    throughput, top1 = summary.get("throughput/images_per_sec"), summary.get("val/best_top1")
    if throughput is not None:
        result = rate_text(throughput)
    elif top1 is not None:  # a train=accuracy point
        result = f"best top-1 {100 * top1:.2f}%"
    else:
        result = f"failed ({summary.get('failure') or 'error'})"
    return f"[{index}/{total}] {' '.join(parts)}: {result}"
