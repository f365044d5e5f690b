"""A rank's process, set up before and around torch for honest timing: the variables torch, CUDA and
inductor read (CUDA's work queues, the lasting compile cache), and its heap: the objects that torch
and Lightning make for the life of the process are frozen out of the garbage collector, and the
collector's passes inside the measured windows are counted. Torch-free, so that the rank package sets
the variables on its first import (rn50/rank/__init__.py) without importing torch outside the lasting
imports."""

import contextlib
import gc
import os
import time

CONNECTIONS_ENV = "CUDA_DEVICE_MAX_CONNECTIONS"


def set_cuda_connections() -> None:
    """32 hardware work queues from this process to each GPU, CUDA's most, where the user set none.

    CUDA's default is 8, shared round-robin by every stream of the process. DALI decodes on some
    25 streams, and those that share training's queue wait behind its kernels, image by image: with 32,
    data=dali ran much closer to synthetic, and synthetic runs stayed the same (benchmarks/notes/2026-11-24-dali-levers.md,
    issue 14's third session). Read when CUDA makes its context, so before any CUDA call."""
    os.environ.setdefault(CONNECTIONS_ENV, "32")


CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"


def compile_cache_dir() -> str:
    """Where torch.compile keeps what it compiled for this rank: TORCHINDUCTOR_CACHE_DIR where the
    user set it, else rn50/torchinductor under the user's cache directory (rn50_cache), and not
    inductor's own /tmp/torchinductor_USER, which a reboot or a fresh container empties. One place per
    user and host: every rank of a run, and every later run, reads what the first compiled (inductor's FX
    graph, autotuning and Triton caches all live under it)."""
    if CACHE_ENV in os.environ:
        return os.environ[CACHE_ENV]
    return os.path.join(rn50_cache(), "torchinductor")


def rn50_cache() -> str:
    """rn50's folder in the user's cache directory: $XDG_CACHE_HOME where it is an absolute path (the XDG
    specification ignores a relative one), else ~/.cache."""
    xdg = os.environ.get("XDG_CACHE_HOME")
    home = xdg if xdg and os.path.isabs(xdg) else os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(home, "rn50")


def writable_dir(where: str) -> bool:
    """Whether `where` is, or could be made, a folder this process may write to."""
    try:
        os.makedirs(where, exist_ok=True)
    except OSError:
        return False
    return os.access(where, os.W_OK)


def set_compile_cache() -> None:
    """Point inductor at compile_cache_dir(); read when it first compiles, so before any compile. Where
    that cannot be written (a home the process may not write to), inductor keeps its own default."""
    where = compile_cache_dir()
    if writable_dir(where):
        os.environ[CACHE_ENV] = where


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
