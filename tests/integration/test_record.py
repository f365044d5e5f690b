"""A stop signal while a run is being made (Ctrl-C, kill, a closed terminal): the run is made whole,
with its params, and then closed as KILLED (the holding itself: tests/unit/test_stops.py)."""

import os
import signal

import pytest

from helpers.store import empty_store_in, runs_in
from rn50.launcher import lifecycle


def _stopped_while(monkeypatch, name):
    """Send SIGTERM to this process right after the store call NAME, as the lifecycle makes it, returns:
    between the store's calls that make a run."""
    real = getattr(lifecycle, name)

    def then_stopped(*args, **kwargs):
        out = real(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGTERM)
        return out

    monkeypatch.setattr(lifecycle, name, then_stopped)


def test_a_stop_between_creating_a_run_and_logging_its_params_closes_a_whole_run(
        compose_cfg, tmp_path, monkeypatch, launcher_signals):
    from rn50.errors import Interrupted
    from rn50 import tracking

    empty_store_in(tmp_path)
    cfg = compose_cfg([f"mlflow.tracking_uri=sqlite:///{tmp_path}/mlflow.db"])
    _stopped_while(monkeypatch, "create_run")
    entered = False
    with pytest.raises(Interrupted):
        with lifecycle.record(cfg, "point", {"dist": "1n1g"}):
            entered = True
    assert not entered  # the stop acted before the benchmark began
    (run,) = runs_in(tmp_path)
    assert run.info.status == "KILLED"
    assert run.data.tags["failure"] == "interrupted" and run.data.tags["error"] == "interrupted by SIGTERM"
    assert run.data.params["data.batch_size"] == str(cfg.data.batch_size)  # its params, all of them
    assert len(run.data.params) == len(tracking.runs.config_params(cfg))


def test_a_run_made_outside_a_record_block_is_closed_before_the_stop_acts(compose_cfg, tmp_path, monkeypatch,
                                                                         launcher_signals):
    """A sweep's parent run, or a SLURM job's run made before submission: the caller never gets the
    id of a run a stop caught in the making, so start_run closes it itself."""
    from rn50.errors import Interrupted

    empty_store_in(tmp_path)
    cfg = compose_cfg([f"mlflow.tracking_uri=sqlite:///{tmp_path}/mlflow.db"])
    _stopped_while(monkeypatch, "create_run")
    with pytest.raises(Interrupted):
        lifecycle.start_run(cfg, "sweep", {"rn50.role": "sweep"}, params=False)
    (run,) = runs_in(tmp_path)
    assert run.info.status == "KILLED"


def test_a_run_whose_params_cannot_be_logged_is_failed_not_left_running(compose_cfg, tmp_path, monkeypatch):
    from rn50.errors import Rn50Error

    empty_store_in(tmp_path)
    cfg = compose_cfg([f"mlflow.tracking_uri=sqlite:///{tmp_path}/mlflow.db"])

    def refused(*args, **kwargs):
        raise RuntimeError("the server refused the batch")

    monkeypatch.setattr(lifecycle, "log_params", refused)
    with pytest.raises(Rn50Error, match="cannot record a run: the server refused the batch"):
        with lifecycle.record(cfg, "point", {}):
            pass
    (run,) = runs_in(tmp_path)
    assert run.info.status == "FAILED" and run.data.tags["error"] == "the server refused the batch"
