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
