"""The variables a rank's process sets before torch, CUDA and inductor read them: CUDA's work queues
and the lasting compile cache. Torch-free, so that the rank package sets them on its first import
(rn50/rank/__init__.py) without importing torch outside rn50/heap.py's lasting imports."""

import os

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
    user set it, else rn50/torchinductor under the user's cache directory ($XDG_CACHE_HOME, or
    ~/.cache), and not inductor's own /tmp/torchinductor_USER, which a reboot or a fresh container
    empties. One place per user and host: every rank of a run, and every later run, reads what the
    first compiled (inductor's FX graph, autotuning and Triton caches all live under it)."""
    if CACHE_ENV in os.environ:
        return os.environ[CACHE_ENV]
    home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(home, "rn50", "torchinductor")


def set_compile_cache() -> None:
    """Point inductor at compile_cache_dir(); read when it first compiles, so before any compile. Where
    that cannot be written (a home the process may not write to), inductor keeps its own default."""
    where = compile_cache_dir()
    try:
        os.makedirs(where, exist_ok=True)
    except OSError:
        return
    if os.access(where, os.W_OK):
        os.environ[CACHE_ENV] = where
