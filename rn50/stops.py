"""The signals that tell rn50 to stop, and holding them while a run is being made.

A run is made in two store calls: MLflow creates it, then rn50 logs its config as params. A stop
that lands between them would leave a run that says nothing of what it ran, so a stop signal
that arrives while a run is made waits for the run to be whole, and is raised again where the
caller can close the run as KILLED. A second stop signal in that time stops at once: a store
that hangs can still be left with Ctrl-C, twice.
"""

import contextlib
import signal
import threading
from typing import Iterator, List

# The ways a launcher is told to stop: Ctrl-C, kill, a closed terminal (or an ended SSH session).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_holding = False


@contextlib.contextmanager
def held(caught: List[int]) -> Iterator[None]:
    """In the block, a stop signal is appended to `caught` instead of acting; raise_caught(caught)
    acts on it later. Only the main thread handles signals (elsewhere, and inside another held
    block, this holds nothing)."""
    global _holding
    if _holding or threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}

    def restore() -> None:
        global _holding
        if _holding:  # once: the handler put back may change them itself (the launcher's ignores later stops)
            _holding = False
            for signum, handler in before.items():
                signal.signal(signum, handler if handler is not None else signal.SIG_DFL)

    def wait(signum, frame):
        if caught:  # the second: stop now, as the handler before would have
            restore()
            signal.raise_signal(signum)
        caught.append(signum)

    for signum in STOP_SIGNALS:
        if before[signum] is not signal.SIG_IGN:  # one that is ignored stays so
            signal.signal(signum, wait)
    _holding = True
    try:
        yield
    finally:
        restore()


def raise_caught(caught: List[int]) -> None:
    """Act on the first stop signal held in `caught`, with the handler in place now (the launcher's
    raises Interrupted here, synchronously: signal.raise_signal runs Python's handlers before it
    returns)."""
    if caught:
        signal.raise_signal(caught[0])
