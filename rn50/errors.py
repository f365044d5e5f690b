"""Errors a user can fix, reported as one line on stderr with a non-zero exit."""

import contextlib
import sys

from omegaconf.errors import OmegaConfBaseException


class Rn50Error(Exception):
    """A problem with the user's input or environment; its message says what would work."""


class ConfigError(Rn50Error):
    """A config value is out of range or inconsistent; the message names the dotted key."""


class RunFailed(Rn50Error):
    """The benchmark processes failed; the MLflow run is marked FAILED with `kind` as its failure tag."""

    def __init__(self, message: str, kind: str = "error"):
        super().__init__(message)
        self.kind = kind


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM reached the launcher; `note` says how the run was closed."""

    def __init__(self, signal_name: str = "SIGINT"):
        super().__init__(signal_name)
        self.signal_name = signal_name
        self.note = ""


OOM_SIGNS = ("outofmemoryerror", "out of memory", "can't allocate memory", "cannot allocate memory")


def failure_kind(message: str) -> str:
    """oom for CUDA's and the CPU allocator's out-of-memory errors, else error."""
    text = message.lower()
    return "oom" if any(sign in text for sign in OOM_SIGNS) else "error"


def error_line(text: str) -> str:
    """The line of an error message that says what went wrong; empty for an empty message."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return ""
    # A DataLoader worker's error arrives as "Caught X in DataLoader worker ...", traceback, "X: ...".
    return lines[-1] if "in DataLoader worker" in lines[0] else lines[0]


def _one_line(exc: BaseException) -> str:
    from hydra.errors import MissingConfigException

    if isinstance(exc, MissingConfigException) and exc.options:
        group = (exc.missing_cfg_file or "").split("/")[0]
        return f"{exc.missing_cfg_file.replace('/', '=', 1)} is not an option; {group} is one of: {', '.join(sorted(exc.options))}"
    cause = exc.__cause__ if isinstance(exc.__cause__, OmegaConfBaseException) else exc
    if isinstance(cause, OmegaConfBaseException):
        key = getattr(cause, "full_key", None)
        msg = str(cause).splitlines()[0]
        return f"{key}: {msg}" if key else msg
    return " ".join(str(exc).split())


@contextlib.contextmanager
def reported(prog: str = "rn50", exit: bool = True, reraise: bool = False):
    """Turn known errors into `prog: error: <one line>` and exit status 2 (1 for a failed run).

    With exit=False the error is printed and swallowed, so a sweep goes on to its next job.
    With reraise=True it is printed and raised on, for a caller that must see it fail.
    """
    from hydra.errors import HydraException

    try:
        yield
    except (Rn50Error, HydraException, OmegaConfBaseException) as exc:
        print(f"{prog}: error: {_one_line(exc)}", file=sys.stderr)
        if reraise:
            raise
        if exit:
            sys.exit(1 if isinstance(exc, RunFailed) else 2)
