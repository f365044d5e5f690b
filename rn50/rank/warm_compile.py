"""A second compiled run that starts in seconds on torch 2.11 (issue 42).

With model.autotune_coordinate_descent, torch before 2.12 tunes kernels again on a warm start, though
its cache holds their tuned block sizes (pytorch/pytorch#172819): the mark "found by coordinate descent"
is dropped on both ways a cached kernel comes back, by CachingAutotuner.recheck_autotune_cache (torch's
static CUDA launcher) and by unpickling a kernel loaded in a compile worker (triton's Config). With the
static launcher off, and the kernels of a warm start loaded in the rank's own process (one compile
thread), the mark survives. Measured on 4 H200s with both set as environment variables (docs/benchmarks.md,
issue 42's thirteenth session): a warm 1-GPU experiment=fastest spent 68.8 s tuning again with the
launcher off alone, 1.2 s with both, and reached its first measured step in 32.9 s; the second 1n4g
run in 40.2 s.

One compile thread suits only a warm start: a first compile compiles its kernels one at a time. So each
rank keeps a mark of its own in the compile cache once a run of its settings has finished, and only a
rank that finds its mark loads in-process. The mark's key errs towards "cold": every setting that can
change a figure, the software and the GPU. A cold start taken for warm would compile on one thread (slow,
never wrong), so there is no mark where the graphs cannot be in the cache (inductor's FX graph cache
off) or where the batch is chosen at run time (data.batch_size=auto); a mark outlives its graphs only
when the cache is emptied by hand but for its rn50-compiled folder. The launcher is off for every run
these settings make, warm or cold: it is part of the FX graph cache's key. Every other run gets torch's
own settings back (a pool rank runs the next sweep point in the same process). rn50.baseline leaves both
as torch has them: it is the reference for what torch does."""

import hashlib
import json
from importlib import metadata
from pathlib import Path
from typing import Optional

import torch
from omegaconf import OmegaConf
from torch._inductor import config as inductor
from torch.torch_version import __version__ as torch_version

from rn50.config.compilation import compile_mode
from rn50.config.schema import Accelerator
from rn50.measure import settings
from rn50.point.identity import NOT_IMAGES_PER_SEC, leaves_out

# The first torch whose cached graphs keep coordinate descent's results (2.12.0 has the fix, 2.11.0 not).
FIXED = "2.12"
MARKS = "rn50-compiled"  # the marks' folder in the compile cache
# torch's own settings, as this process found them (TORCHINDUCTOR_* variables included), for the runs
# that need neither
TORCH_OWN = {"use_static_cuda_launcher": inductor.use_static_cuda_launcher,
             "compile_threads": inductor.compile_threads}


def torch_retunes() -> bool:
    """Whether this torch tunes cached kernels again on a warm start: one before FIXED, its nightlies too."""
    return torch_version < f"{FIXED}.0a0"


def affected(cfg) -> bool:
    """Whether this run compiles for a GPU with coordinate descent tuning on a torch before the fix."""
    return (compile_mode(cfg.model) is not None and bool(cfg.model.autotune_coordinate_descent)
            and cfg.dist.accelerator != Accelerator.cpu and torch.cuda.is_available() and torch_retunes())


def markable(cfg) -> bool:
    """Whether a finished run's graphs are sure to be in the cache under the settings of the next."""
    return bool(inductor.fx_graph_cache) and str(cfg.data.batch_size) != "auto"


def settings_key(cfg, device: str) -> str:
    """What the rank compiles for: every key that can change the figures (so any that can change a
    graph), the torch, and the GPU by name and index (a graph names its device: cuda:1 is not cuda:0)."""
    flat = {}

    def walk(node, prefix: str) -> None:  # resolves only the keys it keeps (where MLflow is may need Hydra's)
        for key, value in node.items():
            dotted = f"{prefix}{key}"
            if leaves_out(dotted if not isinstance(value, dict) else f"{dotted}.", NOT_IMAGES_PER_SEC):
                continue
            if isinstance(value, dict):
                walk(value, f"{dotted}.")
            else:
                flat[dotted] = OmegaConf.select(cfg, dotted)

    walk({k: v for k, v in OmegaConf.to_container(cfg, resolve=False).items() if k != "hydra"}, "")
    software = {name: version(name) for name in ("rn50", "torchvision", "triton")}
    text = json.dumps({"settings": flat, "torch": torch_version, "software": software, "device": device},
                      sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "none"


def this_device() -> str:
    index = torch.cuda.current_device()
    return f"{torch.cuda.get_device_name(index)} cuda:{index}"


def mark_path(cfg, device: str) -> Path:
    return Path(settings.compile_cache_dir()) / MARKS / settings_key(cfg, device)


def prepare(cfg, device: Optional[str] = None) -> bool:
    """Before the model compiles (the rank's GPU set): where torch needs it, the static launcher off and,
    once this rank's settings compiled here, one compile thread. Returns whether it found its mark."""
    # a warm rank of the pool runs the next point in the same process: set either way
    if not affected(cfg):
        for name, value in TORCH_OWN.items():
            setattr(inductor, name, value)
        return False
    inductor.use_static_cuda_launcher = False
    warm = markable(cfg) and mark_path(cfg, device or this_device()).exists()
    inductor.compile_threads = 1 if warm else TORCH_OWN["compile_threads"]
    return warm


def remember(cfg, device: Optional[str] = None) -> None:
    """After a run whose graphs compiled and ran: the next run of these settings loads them in-process.
    A cache that cannot be written keeps nothing, and the run is not failed for it."""
    if not (affected(cfg) and markable(cfg)):
        return
    device = device or this_device()
    path = mark_path(cfg, device)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{device}, torch {torch_version}\n")
    except OSError:
        pass
