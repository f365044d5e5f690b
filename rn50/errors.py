"""Errors a user can fix, reported as one line on stderr with a non-zero exit."""

import re
from typing import Optional


class Rn50Error(Exception):
    """A problem with the user's input or environment; its message says what would work."""


class ConfigError(Rn50Error):
    """A config value is out of range or inconsistent; the message names the dotted key."""


class RunFailed(Rn50Error):
    """The benchmark processes failed; the MLflow run is marked FAILED with `kind` as its failure tag,
    and `log` (the failing rank's output, with its traceback), where there is one, as an artifact."""

    def __init__(self, message: str, kind: str = "error", log: Optional[str] = None):
        super().__init__(message)
        self.kind = kind
        self.log = log


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM reached the launcher; `note` says how the run was closed."""

    def __init__(self, signal_name: str = "SIGINT"):
        super().__init__(signal_name)
        self.signal_name = signal_name
        self.note = ""


class Requeued(SystemExit):
    """A SLURM job that was requeued (by Lightning after its checkpoint on USR1, by `scontrol
    requeue`, by a preemption) is being stopped by SLURM: its run stays open for the job's next
    start, which resumes from `checkpoint` (train=accuracy), and submitit records no result (it
    writes none for a SystemExit), so the submitting host keeps waiting for that start."""

    def __init__(self, checkpoint: str):
        super().__init__(0)
        self.checkpoint = checkpoint


OOM_SIGNS = ("outofmemoryerror", "out of memory", "can't allocate memory", "cannot allocate memory")


DIVERGED = "diverged"
"""The failure kind of a run whose loss stopped being finite (MLflow tag `failure`)."""
STALLED = "stalled"
"""The failure kind of a run whose loss scaler skipped every measured step."""


def failure_kind(message: str) -> str:
    """oom for CUDA's and the CPU allocator's out-of-memory errors; diverged and stalled for a run
    that did not train (rn50/measure/trained.py's lines, and rn50/rank/training.py's); else error."""
    text = message.lower()
    for kind in (DIVERGED, STALLED):
        if f"training {kind}" in text:
            return kind
    return "oom" if any(sign in text for sign in OOM_SIGNS) else "error"


def error_line(text: str) -> str:
    """The line of an error message that says what went wrong; empty for an empty message."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return ""
    # A DataLoader worker's error arrives as "Caught X in DataLoader worker ...", traceback, "X: ...".
    if "in DataLoader worker" in lines[0]:
        return re.sub(r"^[\w.]+: ", "", lines[-1])
    return lines[0]
