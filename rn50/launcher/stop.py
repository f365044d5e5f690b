"""How the launcher stops.

On a stop signal (Ctrl-C, kill, a closed terminal) it closes its run as KILLED and stops its ranks;
on any failure it kills ranks started for a run that will not happen and closes a sweep's parent
run, with one last line on stderr.

A run is made in two store calls: MLflow creates it, then rn50 logs its config as params. A stop
that lands between them would leave a run that says nothing of what it ran, so a stop signal
that arrives while a run is made waits for the run to be whole (held), and is raised again where the
caller closes the run as KILLED (rn50/launcher/lifecycle.py). A second Ctrl-C in that time stops at
once: a store that hangs can still be left. A second SIGTERM or SIGHUP waits with the first (a
closing terminal sends SIGHUP twice).
"""

import contextlib
import os
import shlex
import signal
import sys
import threading
from typing import Dict, Iterator, List

from rn50.errors import Interrupted
from rn50.launcher import pool, rundir
from rn50.tracking import runs

# A sweep's jobs find its parent run, and the store it is in, here (rn50/launcher/sweep.py sets them);
# a command that fails closes that run.
PARENT_ENV = "RN50_SWEEP_PARENT_RUN_ID"
URI_ENV = "RN50_SWEEP_TRACKING_URI"

# The ways a launcher is told to stop: Ctrl-C, kill, a closed terminal (or an ended SSH session).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_holding = False


@contextlib.contextmanager
def held(caught: List[int]) -> Iterator[None]:
    """In the block, a stop signal is appended to `caught` instead of acting; raise_caught(caught)
    acts on it later. Only the main thread handles signals (elsewhere, and inside another held
    block, this holds nothing). A signal that is ignored, or whose handler is not Python's, is left
    as it is."""
    global _holding
    if _holding or threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    before = {signum: handler for signum, handler in before.items() if handler not in (signal.SIG_IGN, None)}
    holding = [True]

    def restore() -> None:
        if holding[0]:  # once: the handler put back may change them itself (the launcher's ignores later stops)
            holding[0] = False
            for signum, handler in before.items():
                signal.signal(signum, handler)

    def wait(signum, frame):
        if holding[0] and not (caught and signum == signal.SIGINT):
            caught.append(signum)
            return
        restore()  # a second Ctrl-C, or a signal that came as the block ended: acts now, as before
        handler = before[signum]
        if callable(handler):
            handler(signum, frame)
        else:  # SIG_DFL, put back above: the signal's default action
            signal.raise_signal(signum)

    _holding = True
    try:
        for signum in before:
            signal.signal(signum, wait)
        yield
    finally:
        restore()
        _holding = False


def raise_caught(caught: List[int]) -> None:
    """Act on the first stop signal held in `caught`, with the handler in place now (the launcher's
    raises Interrupted here, synchronously: signal.raise_signal runs Python's handlers before it
    returns)."""
    if caught:
        signal.raise_signal(caught[0])


def interrupted_tags(exc: BaseException) -> Dict[str, str]:
    """A run a stop signal ended (KILLED): failure=interrupted, and the signal in `error`."""
    return {"failure": "interrupted", "error": f"interrupted by {getattr(exc, 'signal_name', 'SIGINT')}"}


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


def stopped_sweep(parent: str, closed: bool) -> str:
    """The end of a stopped sweep's last line: what became of it, and the two commands a user wants next (its
    finished points stay recorded; a scheduler's time limit is the usual stop)."""
    if not closed:
        return f"; sweep {parent} left open: the store failed"
    uri = shlex.quote(os.environ[URI_ENV])
    return (f"; sweep {parent} marked KILLED: the same command with sweep.resume=true runs its other points, and "
            f"`python -m rn50.report --parent-run-id {parent} --tracking-uri {uri}` reports those that finished")


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
        closed = False
        if parent and not (isinstance(exc, SystemExit) and exc.code in (0, None)):
            interrupted = isinstance(exc, KeyboardInterrupt)
            closed = runs.close_failed(os.environ[URI_ENV], parent, interrupted_tags(exc) if interrupted else {},
                                       killed=interrupted)
        if isinstance(exc, KeyboardInterrupt):
            what = getattr(exc, "signal_name", "SIGINT")
            note = getattr(exc, "note", "") or "no run was open"
            say(f"rn50: interrupted by {what}: {note}" + (stopped_sweep(parent, closed) if parent else ""))
            sys.exit(128 + signal.Signals[what])
        if isinstance(exc, OSError):  # Hydra writing its output directory, say, on a read-only or a full disk
            where = exc.filename or (rundir.taken() if exc.errno in rundir.UNWRITABLE else None)
            if where:
                say(f"rn50: error: {rundir.unwritable(where, 'hydra.run.dir', exc)}")
                sys.exit(2)
        raise
