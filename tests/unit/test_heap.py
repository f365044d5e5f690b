"""rn50/heap.py: a rank's imports load with the garbage collector held off, and stay frozen out of it."""

import gc

import pytest

from rn50.heap import lasting_imports


def test_nothing_is_collected_while_the_imports_load_and_what_they_made_is_frozen():
    before = gc.get_freeze_count()
    with lasting_imports():
        assert not gc.isenabled()
        made = [[i] for i in range(1000)]  # what an import leaves alive: tracked objects
    assert gc.isenabled()
    assert gc.get_freeze_count() >= before + len(made)


def test_a_collector_that_was_off_stays_off_and_a_failed_import_still_freezes():
    gc.disable()
    try:
        before = gc.get_freeze_count()
        with pytest.raises(ImportError):
            with lasting_imports():
                made = [[i] for i in range(1000)]
                raise ImportError("no module named x")
        assert not gc.isenabled()
        assert gc.get_freeze_count() >= before + len(made)
    finally:
        gc.enable()
