"""A quiet console: dependencies' adverts, banners and known-harmless warnings are dropped.

`quiet()` runs at the start of each of rn50's own processes (the launcher and every
rank), so importing rn50 elsewhere changes nothing. Lines are dropped by their text,
one pattern per known line, never by raising a logger's level: a warning from the
same library about the user's own setup still shows, and so does everything rn50
logs itself (the CPU fallback, a missing MFU peak, throttling clocks).
RN50_VERBOSE=1 shows everything.
"""

import contextlib
import logging
import os
import re
import sys
import warnings
from pathlib import Path
from typing import Iterator, Optional, TextIO

VERBOSE_ENV = "RN50_VERBOSE"

# Lightning's info lines: rn50 owns the run's output, so these say nothing to its user.
LOG_NOISE = (
    r"💡 Tip: .*litlogger",  # an advert, printed by every Trainer without a LitLogger
    r"(GPU|TPU|HPU|IPU) available: ",  # rn50 chose the accelerator and logs it as a tag
    r"LOCAL_RANK: \d+ - CUDA_VISIBLE_DEVICES: ",
    r"Initializing distributed: GLOBAL_RANK: ",
    r"-+\ndistributed_backend=",  # "All distributed processes registered"
    r"`Trainer\.fit` stopped: `max_steps=\d+` reached",  # rn50 sets max_steps: the normal end
    # rn50's precision option sets the float32 matmul precision on purpose (fp32 keeps 'highest').
    r"You are using a CUDA device .* that has Tensor Cores",
    # MLflow making or migrating a new sqlite store: routine on the first run in a directory.
    r"Creating initial MLflow database tables",
    r"Updating database tables",
    # urllib3 retrying a request to a tracking server that went away: rn50 says it in one line once
    # MLflow gives up (and keeps the result).
    r"Retrying \(Retry\(total=",
)

# The loggers those lines come from. A logger's filter sees only its own records, not those
# its children pass up, so each emitting logger gets one; getLogger makes the ones not yet made.
NOISY_LOGGERS = (
    "lightning_utilities.core.rank_zero",  # rank_zero_info goes through whichever of these
    "lightning_fabric.utilities.rank_zero",  # three modules set the shared logger last
    "pytorch_lightning.utilities.rank_zero",
    "lightning.fabric.utilities.rank_zero",  # the same modules in the `lightning` package
    "lightning.pytorch.utilities.rank_zero",
    "lightning_fabric.utilities.distributed",
    "lightning.fabric.utilities.distributed",
    "pytorch_lightning.accelerators.cuda",
    "lightning.pytorch.accelerators.cuda",
    "mlflow.store.db.utils",
    "urllib3.connectionpool",
)

# (category, message regex) of dependency warnings that are about the dependencies themselves.
WARNING_NOISE = (
    # Lightning 2.6's own use of a torch pytree API that torch 2.10+ deprecates; once per rank.
    (FutureWarning, r"`isinstance\(treespec, LeafSpec\)` is deprecated"),
    # Lightning's hint to prepend srun, on any host with SLURM's commands: rn50 starts the ranks
    # itself (cluster=local, torchrun), and under cluster=slurm srun has started them.
    (UserWarning, r"The `srun` command is available on your system but is not used"),
)


class DropLines(logging.Filter):
    """Drops log records whose message matches one of the patterns."""

    def __init__(self, patterns=LOG_NOISE):
        super().__init__()
        self.pattern = re.compile("|".join(f"(?:{p})" for p in patterns))

    def filter(self, record: logging.LogRecord) -> bool:
        return not self.pattern.match(record.getMessage())


_FILTER = DropLines()


def verbose() -> bool:
    return os.environ.get(VERBOSE_ENV, "").strip().lower() not in ("", "0", "false", "no")


def quiet(show_all: Optional[bool] = None) -> None:
    """Drop the known dependency noise in this process; show_all (default: RN50_VERBOSE) keeps it.

    Safe to call more than once. Call it first thing in a process: warnings filters do not
    reach child processes, so the launcher and every rank each call it.
    """
    if verbose() if show_all is None else show_all:
        return
    for name in NOISY_LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
    for category, message in WARNING_NOISE:
        warnings.filterwarnings("ignore", message=message, category=category)


_terminal: Optional[TextIO] = None  # set while a rank's stderr goes to its log (stderr_to)


def terminal() -> TextIO:
    """Where rn50's own progress lines go: stderr, or the console a rank had before its stderr
    went to its log."""
    return _terminal or sys.stderr


@contextlib.contextmanager
def stderr_to(path: Path) -> Iterator[Optional[Path]]:
    """For the block, this process's stderr goes to `path` (appended): tracebacks, warnings, the
    libraries' messages and those of C code and child processes alike, so that a rank that fails
    prints one line, and the log holds the rest. rn50's progress stays on the console
    (`terminal()`). With RN50_VERBOSE=1 everything stays on the console, and the block gets None."""
    global _terminal
    if verbose():
        yield None
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    console = os.dup(2)
    with open(path, "a") as log:
        os.dup2(log.fileno(), 2)
    _terminal = open(os.dup(console), "w", buffering=1)
    try:
        yield path
    finally:
        sys.stderr.flush()
        os.dup2(console, 2)
        os.close(console)
        _terminal.close()
        _terminal = None


log = logging.getLogger("rn50")

def cpu_precision_warning(precision, device_type) -> str:
    """On a CPU with fp16 autocast (precision=amp or amp_static), log one warning line and return it.

    PyTorch's CPU kernels have no fast fp16 training path (docs/benchmarks.md, "The CPU
    profile"). Returns "" (and logs nothing) for any other precision or device.
    Takes a precision object (rn50/options/precision.py) and 'cpu' or Accelerator.cpu.
    """
    device = getattr(device_type, "value", device_type)
    if device != "cpu" or precision.autocast != "float16":
        return ""
    line = (f"precision={precision.name} on the CPU: fp16 autocast is slow on CPUs, from 3 to 90 times slower "
            "than fp32 in rn50's tests; use precision=fp32, or precision=bf16")
    log.warning(line)
    return line


def drop_file_logs(folder: Path) -> None:
    """Stop logging into files in `folder` (Hydra's job log): a disk that filled up there would make
    every later line a "--- Logging error ---" traceback on the console."""
    for logger in [logging.getLogger(), *[logging.getLogger(n) for n in list(logging.root.manager.loggerDict)]]:
        for handler in list(getattr(logger, "handlers", [])):
            if isinstance(handler, logging.FileHandler) and Path(handler.baseFilename).parent == Path(folder).resolve():
                logger.removeHandler(handler)
                with contextlib.suppress(OSError):
                    handler.close()
