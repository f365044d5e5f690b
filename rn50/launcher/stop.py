"""How the launcher stops: on a stop signal (Ctrl-C, kill, a closed terminal) it closes its run as
KILLED and stops its ranks; on any failure it kills ranks started for a run that will not happen
and closes a sweep's parent run, with one last line on stderr."""

import contextlib
import os
import signal
import sys
from typing import Iterator

from rn50.errors import Interrupted
from rn50.launcher import pool
from rn50.launcher import rundir
from rn50.launcher.sweep import PARENT_ENV, URI_ENV
from rn50.stops import STOP_SIGNALS
from rn50.tracking import store as tracking


def _interrupted(signum, frame):
    # The first stop signal stops the run; later ones (a closing terminal's shell sends SIGHUP to
    # its jobs, and the kernel sends another when the shell ends) must not cut short its closing.
    for other in STOP_SIGNALS:
        signal.signal(other, signal.SIG_IGN)
    raise Interrupted(signal.Signals(signum).name)


def say(line: str) -> None:
    """A last line on stderr, which a closed terminal no longer takes."""
    try:
        print(line, file=sys.stderr)
    except OSError:
        pass


def on_signals() -> None:
    """Stop signals raise Interrupted in the launcher; a rank that torchrun or srun started keeps
    theirs (its starter stops it)."""
    if "RANK" not in os.environ and "SLURM_STEP_ID" not in os.environ:
        for signum in STOP_SIGNALS:  # each closes the launcher's run as KILLED and stops its ranks
            signal.signal(signum, _interrupted)


@contextlib.contextmanager
def closing() -> Iterator[None]:
    """Around the whole command: what a failure, or a stop, leaves behind is closed."""
    try:
        yield
    except BaseException as exc:
        if not (isinstance(exc, SystemExit) and exc.code in (0, None)):
            pool.close_all(kill=True)  # ranks started for a run that will not happen
        # A sweep stopped before its end (a job that does not compose, Ctrl-C) closes its parent run.
        parent = os.environ.pop(PARENT_ENV, None)
        if parent and not (isinstance(exc, SystemExit) and exc.code in (0, None)):
            interrupted = isinstance(exc, KeyboardInterrupt)
            tracking.close_failed(os.environ[URI_ENV], parent, tracking.interrupted_tags(exc) if interrupted else {},
                                  killed=interrupted)
        if isinstance(exc, KeyboardInterrupt):
            what = getattr(exc, "signal_name", "SIGINT")
            note = getattr(exc, "note", "") or "no run was open"
            say(f"rn50: interrupted by {what}: {note}" + (f"; sweep {parent} marked KILLED" if parent else ""))
            sys.exit(128 + signal.Signals[what])
        if isinstance(exc, OSError):  # Hydra writing its output directory, say, on a read-only or a full disk
            where = exc.filename or (rundir.taken() if exc.errno in rundir.UNWRITABLE else None)
            if where:
                say(f"rn50: error: {rundir.unwritable(where, 'hydra.run.dir', exc)}")
                sys.exit(2)
        raise
