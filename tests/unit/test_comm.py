"""The gradient all-reduce timed apart from the steps (rn50/measure/comm.py): nccl-tests' bus bandwidth,
the transport read from NCCL's log, a probe that never runs inside a measured window, and a network
that changed between the probe before the warm-up and the one after the windows."""

import os
import types

import pytest
import torch

from rn50.measure import comm
from rn50.rank import throughput
from rn50.rank.throughput import ThroughputCallback
from rn50.results.summary import communication
from rn50.wire import RankResult

NCCL_LOG = """\
host:1:2 [0] NCCL INFO NCCL version 2.28.9+cuda13.0
host:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
host:1:2 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/CUMEM/read
host:1:2 [0] NCCL INFO Channel 00/0 : 2[0] -> 0[0] [receive] via NET/Socket/0
host:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 2[0] [send] via NET/Socket/0
"""


@pytest.mark.parametrize("world, expected", [(2, 100.0), (4, 150.0), (8, 175.0)])
def test_bus_bandwidth_is_nccl_tests_definition(world, expected):
    # 100 MB in 1 ms is 100 GB/s of algorithm bandwidth; a ring moves 2(n-1)/n of it over each link
    assert comm.bus_bandwidth_GBps(100e6, 1.0, world) == pytest.approx(expected)


def test_transports_are_read_from_ncclss_log(tmp_path, monkeypatch):
    log = tmp_path / "nccl.log"
    monkeypatch.setenv(comm.NCCL_LOG_ENV, str(log))
    assert comm.transports() is None  # NCCL never started: no file
    log.write_text(NCCL_LOG)
    assert comm.transports() == "NET/Socket+P2P"
    assert comm.transports(nvlink=True) == "NET/Socket+P2P/NVLink"
    assert comm.transports(nvlink=False) == "NET/Socket+P2P/PCIe"
    log.write_text(NCCL_LOG.replace("P2P/CUMEM/read", "SHM/direct/direct"))
    assert comm.transports(nvlink=True) == "NET/Socket+SHM"
    log.write_text("host:1:2 [0] NCCL INFO NCCL version 2.28.9+cuda13.0\n")
    assert comm.transports() is None
    assert comm.joined(["P2P/NVLink", None, "NET/Socket+P2P/NVLink"]) == "NET/Socket+P2P/NVLink"
    assert comm.joined([None, None]) is None


def test_ncclss_log_is_turned_on_unless_the_user_set_one(monkeypatch):
    for name in ("NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE", comm.NCCL_LOG_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(comm.atexit, "register", lambda *a: None)
    comm.log_transports()
    mine = f"rn50-nccl-{os.getpid()}.log"
    assert os.environ["NCCL_DEBUG"] == "INFO" and os.environ["NCCL_DEBUG_SUBSYS"] == "INIT"
    assert os.environ["NCCL_DEBUG_FILE"] == os.environ[comm.NCCL_LOG_ENV] and os.environ["NCCL_DEBUG_FILE"].endswith(mine)
    # A child of an rn50 process inherits its variables: it logs to a file of its own.
    monkeypatch.setenv("NCCL_DEBUG_FILE", "/tmp/rn50-nccl-1.log")
    monkeypatch.setenv(comm.NCCL_LOG_ENV, "/tmp/rn50-nccl-1.log")
    comm.log_transports()
    assert os.environ["NCCL_DEBUG_FILE"].endswith(mine)
    # The user's own NCCL_DEBUG stays theirs: no transport is read then.
    monkeypatch.setenv("NCCL_DEBUG", "WARN")
    monkeypatch.delenv("NCCL_DEBUG_FILE")
    monkeypatch.delenv(comm.NCCL_LOG_ENV)
    comm.log_transports()
    assert os.environ["NCCL_DEBUG"] == "WARN" and "NCCL_DEBUG_FILE" not in os.environ
    assert comm.transports() is None


def _rank(rank, ms, transport="P2P/NVLink", before=None):
    return RankResult(rank=rank, node_rank=0, local_rank=rank, hostname="h", pid=1, windows=[],
                      allreduce_ms=ms, allreduce_before_ms=before, allreduce_bytes=102_000_000, transport=transport)


def test_a_run_records_its_slowest_ranks_all_reduce():
    m = communication([_rank(0, 1.0), _rank(1, 2.0)])
    assert m["comm/allreduce_ms"] == 2.0 and m["comm/gradient_MB"] == pytest.approx(102.0)
    assert m["comm/busbw_GBps"] == pytest.approx(comm.bus_bandwidth_GBps(102e6, 2.0, 2))
    assert "comm/allreduce_before_ms" not in m  # no timing before the first step: no change to tell
    assert communication([_rank(0, None, None)]) == {}  # one rank: nothing timed, nothing recorded


def test_a_run_records_how_much_its_network_changed_from_before_the_warm_up():
    m = communication([_rank(0, 44.0, before=40.0), _rank(1, 58.0, before=43.9)])
    assert m["comm/allreduce_before_ms"] == 43.9 and m["comm/allreduce_ms"] == 58.0  # the slowest rank's, each
    assert m["comm/allreduce_change_pct"] == pytest.approx(100 * (58.0 - 43.9) / 43.9)


@pytest.mark.parametrize("before, after, step, changed", [
    (43.9, 58.3, 90.0, True),    # sockets over loopback, the twentieth session: +33%, 16% of a step
    (58.3, 43.9, 90.0, True),    # faster by as much is as much a change
    (50.0, 55.0, 90.0, False),   # +10%: within the threshold
    (50.0, 60.0, 90.0, False),   # +20% exactly: not over the threshold
    (0.40, 0.55, 43.0, False),   # NVLink: +38%, but 0.3% of a step
    (None, 58.3, 90.0, None),    # one timing: nothing to compare
])
def test_the_headline_names_a_network_that_changed_under_the_run(before, after, step, changed):
    metrics = {"comm/allreduce_ms": after, "step_time/median_ms": step}
    if before is not None:
        metrics["comm/allreduce_before_ms"] = before
    assert comm.network_changed(metrics) is changed
    note = comm.network_change_note(metrics)
    assert bool(note) is bool(changed)
    if changed:
        assert note.startswith("the network changed during the run: ") and f"{before:.2f} ms before the warm-up" in note


class _Trainer(types.SimpleNamespace):
    """What ThroughputCallback reads of Lightning's Trainer, for two ranks of which this is rank 0."""

    def __init__(self):
        super().__init__(world_size=2, global_rank=0, node_rank=0, local_rank=0, is_global_zero=True,
                         strategy=types.SimpleNamespace(root_device=torch.device("cpu")),
                         precision_plugin=types.SimpleNamespace())


def test_the_all_reduce_is_timed_before_the_first_step_and_after_the_last_window_never_inside_one(monkeypatch):
    bench = types.SimpleNamespace(warmup_steps=2, steps=3, repeats=2, comm_iters=4)
    callback = ThroughputCallback(bench, types.SimpleNamespace(interval_s=0.2), "cpu", 4)
    seen = []

    def probe(nbytes, device, iters):
        seen.append((callback.timer.measuring, len(callback.timer.windows), nbytes, iters))
        return 1.5 if len(seen) == 1 else 2.5  # the network slower by the end

    monkeypatch.setattr(throughput, "allreduce_ms", probe)
    trainer, module = _Trainer(), torch.nn.Linear(10, 10)
    callback.setup(trainer, module, "fit")
    callback.on_fit_start(trainer, module)  # before Lightning starts the data loaders
    # once before any step: 110 float32 parameters of the Linear layer
    assert seen == [(False, 0, 440, 4)]
    for step in range(callback.timer.total_steps):
        callback.on_train_batch_start(trainer, module, None, step)
        callback.on_train_batch_end(trainer, module, torch.tensor(1.0), None, step)
    assert len(seen) == 1  # nothing was timed while the steps ran
    callback.on_train_end(trainer, module)
    callback.teardown(trainer, module, "fit")
    # and once more, with every window closed
    assert seen == [(False, 0, 440, 4), (False, 2, 440, 4)]
    (mine,) = callback.ranks
    assert (mine.allreduce_before_ms, mine.allreduce_ms, mine.allreduce_bytes) == (1.5, 2.5, 440)


def test_a_single_rank_or_comm_iters_0_times_nothing(monkeypatch):
    monkeypatch.setattr(throughput, "allreduce_ms", lambda *a: pytest.fail("timed an all-reduce"))
    for world, iters in ((1, 20), (2, 0)):
        bench = types.SimpleNamespace(warmup_steps=1, steps=1, repeats=1, comm_iters=iters)
        callback = ThroughputCallback(bench, types.SimpleNamespace(interval_s=0.2), "cpu", 4)
        trainer, module = _Trainer(), torch.nn.Linear(2, 2)
        trainer.world_size = world
        callback.setup(trainer, module, "fit")
        callback.on_fit_start(trainer, module)
        for step in range(callback.timer.total_steps):
            callback.on_train_batch_start(trainer, module, None, step)
            callback.on_train_batch_end(trainer, module, torch.tensor(1.0), None, step)
        callback.on_train_end(trainer, module)
        callback.teardown(trainer, module, "fit")
        assert callback.ranks[0].allreduce_ms is None and callback.ranks[0].allreduce_before_ms is None
