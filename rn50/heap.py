"""The heap of a rank process: torch and Lightning make objects that live as long as the process."""

import contextlib
import gc


@contextlib.contextmanager
def lasting_imports():
    """Import what a process keeps to its end: torch, Lightning and what Lightning imports make about
    half a million objects. While they load, each full garbage collection would walk all of them again
    (about 2 CPU-s of a rank's start-up on 2 cores), so nothing is collected then; afterwards they are
    frozen out of every later collection, which keeps those short too, the ones inside a measured
    window among them. Objects made after it (a run's model, trainer and data) are collected as usual."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()
