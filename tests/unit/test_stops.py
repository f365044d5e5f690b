"""rn50/launcher/stop.py: a stop signal held while a run is made acts once the block ends; a second one acts
at once; and the launcher's handler is what acts."""

import os
import signal

import pytest

from rn50.launcher import stop as stops
from rn50.errors import Interrupted
from rn50.launcher import stop


def test_a_stop_in_the_block_waits_for_its_end(launcher_signals):
    caught, done = [], []
    with stops.held(caught):
        os.kill(os.getpid(), signal.SIGTERM)
        done.append("after the signal")
    assert done and caught == [signal.SIGTERM]
    assert signal.getsignal(signal.SIGTERM) is stop._interrupted  # put back
    with pytest.raises(Interrupted):
        stops.raise_caught(caught)


def test_a_second_ctrl_c_acts_at_once(launcher_signals):
    caught, done = [], []
    with pytest.raises(Interrupted):
        with stops.held(caught):
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGINT)
            done.append("after both")
    assert not done  # a store that hangs can be left
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN  # the launcher's handler acted: it ignores later stops


def test_a_closing_terminals_second_sighup_waits_with_the_first(launcher_signals):
    caught, done = [], []
    with stops.held(caught):
        os.kill(os.getpid(), signal.SIGHUP)
        os.kill(os.getpid(), signal.SIGHUP)
        done.append("after both")
    assert done and caught == [signal.SIGHUP, signal.SIGHUP]
    with pytest.raises(Interrupted):
        stops.raise_caught(caught)


def test_an_ignored_signal_stays_ignored_and_a_nested_block_holds_nothing_more(launcher_signals):
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # nohup
    outer, inner = [], []
    with stops.held(outer):
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
        with stops.held(inner):
            os.kill(os.getpid(), signal.SIGINT)
        assert not inner and outer == [signal.SIGINT]  # the outer block's, raised where it ends
    stops.raise_caught(inner)  # nothing
    with pytest.raises(Interrupted):
        stops.raise_caught(outer)


@pytest.mark.parametrize("closed", [True, False])
def test_a_stopped_sweeps_last_line_says_what_became_of_it(monkeypatch, capsys, closed):
    """A stop in a sweep closes its parent run, then names the next commands; a store that failed to close it
    is said instead (the commands would not work against it)."""
    monkeypatch.setenv(stop.PARENT_ENV, "p1")
    monkeypatch.setenv(stop.URI_ENV, "sqlite:////runs here/mlflow.db")
    calls = []
    monkeypatch.setattr(stop.runs, "close_failed", lambda *args, **kwargs: calls.append(kwargs) or closed)
    with pytest.raises(SystemExit) as exited:
        with stop.closing():
            raise Interrupted("SIGTERM")
    assert exited.value.code == 128 + signal.SIGTERM and calls == [{"killed": True}]
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("rn50: interrupted by SIGTERM: no run was open; sweep p1 ")
    if closed:
        assert last.endswith("`python -m rn50.report --parent-run-id p1 --tracking-uri "
                             "'sqlite:////runs here/mlflow.db'` reports those that finished")
    else:
        assert last.endswith("sweep p1 left open: the store failed")
