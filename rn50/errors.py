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
