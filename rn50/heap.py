"""The heap of a rank process: torch and Lightning make objects that live as long as the process."""

import contextlib
import gc
import time


@contextlib.contextmanager
def lasting_imports():
    """Import what a process keeps to its end (torch, Lightning and what Lightning imports: hundreds of
    thousands of objects). While they load, every full garbage collection would walk all of them again, so
    nothing is collected then; afterwards gc.freeze() leaves them out of every later collection, which
    would otherwise walk them too. Objects made after it (a run's model, trainer and data) are collected as
    usual. What it saves: benchmarks/notes/2026-11-25-package-layout.md, "A rank's imports frozen out of the garbage collector".

    Use it once per process, before any run's objects exist: gc.freeze() takes every object alive at that
    moment, garbage not yet collected included, and none of it is collected again."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


class Collections:
    """The garbage collector's passes while `counting` is on (gc.callbacks): how many, and the host
    milliseconds they took. A rank counts those inside its measured windows, where each pass stops
    the host from queueing work."""

    def __init__(self):
        self.count, self.ms, self.counting = 0, 0.0, False
        self._started = None

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter() if self.counting else None
        elif self._started is not None:
            self.count += 1
            self.ms += 1e3 * (time.perf_counter() - self._started)
            self._started = None
