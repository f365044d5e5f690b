"""The signals that tell rn50 to stop, and holding them while a run is being made.

A run is made in two store calls: MLflow creates it, then rn50 logs its config as params. A stop
that lands between them would leave a run that says nothing of what it ran, so a stop signal
that arrives while a run is made waits for the run to be whole, and is raised again where the
caller closes the run as KILLED. A second Ctrl-C in that time stops at once: a store that hangs
can still be left. A second SIGTERM or SIGHUP waits with the first (a closing terminal sends
SIGHUP twice).
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
