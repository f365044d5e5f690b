"""rn50/measure/settings.py: a rank's imports load with the garbage collector held off, and stay frozen out of it."""

import contextlib
import gc
import sys
import types

import pytest

import rn50.rank
from rn50.measure.settings import lasting_imports
from rn50.launcher import launch


def tracked(objects) -> bool:
    """Whether the collector still walks any of these (gc.get_objects leaves frozen objects out)."""
    ids = {id(o) for o in objects}
    return any(id(o) in ids for o in gc.get_objects())


def test_nothing_is_collected_while_the_imports_load_and_what_they_made_is_frozen():
    gc.collect()  # what earlier tests left is not this test's to freeze
    with lasting_imports():
        assert not gc.isenabled()
        made = [[i] for i in range(10)]  # what an import leaves alive: objects the collector tracks
        assert tracked(made)
    assert gc.isenabled()
    assert not tracked(made)


def test_a_collector_that_was_off_stays_off_and_a_failed_import_still_freezes():
    gc.collect()
    gc.disable()
    try:
        with pytest.raises(ImportError):
            with lasting_imports():
                made = [[i] for i in range(10)]
                raise ImportError("no module named x")
        assert not gc.isenabled()
        assert not tracked(made)
    finally:
        gc.enable()


def test_a_process_that_torchrun_or_slurm_made_a_rank_imports_its_rank_under_it(monkeypatch):
    """launch.run_rank_here imports rn50/rank/here.py (torch, Lightning) inside lasting_imports."""
    steps = []

    @contextlib.contextmanager
    def recording():
        steps.append("enter")
        yield
        steps.append("exit")

    here = types.ModuleType("rn50.rank.here")
    here.run_rank_here = lambda cfg, out, options: steps.append("run") or ["rank 0"]
    monkeypatch.setitem(sys.modules, "rn50.rank.here", here)
    monkeypatch.setattr(rn50.rank, "here", here, raising=False)
    monkeypatch.setattr(launch, "lasting_imports", recording)
    assert launch.run_rank_here(None, None, None) == ["rank 0"]
    assert steps == ["enter", "exit", "run"]
