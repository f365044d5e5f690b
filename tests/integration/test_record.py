"""A stop signal while a run is being made (Ctrl-C, kill, a closed terminal): the run is made whole,
with its params, and then closed as KILLED (the holding itself: tests/unit/test_stops.py)."""

import os
import shutil
import signal

import pytest

from conftest import _empty_store, runs_in


@pytest.fixture
def launcher_signals():
    """The launcher's stop handlers (rn50/launcher/stop.py), put back as they were afterwards."""
    from rn50.launcher import stop
    from rn50.stops import STOP_SIGNALS

    before = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    for signum in STOP_SIGNALS:
        signal.signal(signum, stop._interrupted)
    yield
    for signum, handler in before.items():
        signal.signal(signum, handler)


def _stopped_while(monkeypatch, name, times=1):
    """Send SIGTERM to this process `times` times right after tracking.store.NAME returns: between
    the store's calls that make a run."""
    from rn50.tracking import store as tracking

    real = getattr(tracking, name)

    def then_stopped(*args, **kwargs):
        out = real(*args, **kwargs)
        for _ in range(times):
            os.kill(os.getpid(), signal.SIGTERM)
        return out

    monkeypatch.setattr(tracking, name, then_stopped)


def test_a_stop_between_creating_a_run_and_logging_its_params_closes_a_whole_run(
        compose_cfg, tmp_path, monkeypatch, launcher_signals):
    from rn50.errors import Interrupted
    from rn50.tracking import store as tracking

    shutil.copy(_empty_store(), tmp_path / "mlflow.db")
    cfg = compose_cfg([f"mlflow.tracking_uri=sqlite:///{tmp_path}/mlflow.db"])
    _stopped_while(monkeypatch, "create_run")
    entered = False
    with pytest.raises(Interrupted):
        with tracking.record(cfg, "point", {"dist": "1n1g"}):
            entered = True
    assert not entered  # the stop acted before the benchmark began
    (run,) = runs_in(tmp_path)
    assert run.info.status == "KILLED"
    assert run.data.params["data.batch_size"] == str(cfg.data.batch_size)  # its params, all of them
    assert len(run.data.params) == len(tracking.config_params(cfg))
