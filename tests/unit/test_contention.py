"""What else ran beside a run's windows (rn50/measure/host.py, rn50/results/summary.py's contention): the
host's CPU time against the run's own, and other processes on its GPUs."""

import pytest

from rn50.measure import host
from rn50.results.summary import contention
from rn50.wire import RankResult


def rank(r, host_s, own_s, wall_s=10.0, hostname="node1", gpu_pids=(), samples=()):
    return RankResult(rank=r, node_rank=0, local_rank=r, hostname=hostname, pid=100 + r, windows=[], cpu_cores=8,
                      host_busy_s=host_s, own_cpu_s=own_s, windows_wall_s=wall_s, gpu_pids=list(gpu_pids),
                      samples=list(samples))


def test_other_processes_cpu_time_is_the_hosts_less_the_runs():
    # Two ranks on one host each used 10 s of CPU in 10 s of windows; the host was busy for 31 s: 1.1 cores more.
    metrics, tags = contention([rank(0, 31.0, 10.0), rank(1, 30.5, 10.0)])
    assert metrics["host/other_cpu_cores"] == pytest.approx(1.1)
    assert tags == {"contended": "true", "contention": "other processes kept 1.1 of 8 cores busy on node1"}
    quiet, tags = contention([rank(0, 20.6, 10.0), rank(1, 20.6, 10.0)])  # the host's own daemons: 0.06 cores
    assert quiet["host/other_cpu_cores"] == pytest.approx(0.06) and tags == {"contended": "false"}
    # Each host alone: a busy second host is named, the quiet first is not.
    _, tags = contention([rank(0, 10.0, 10.0), rank(1, 40.0, 10.0, hostname="node2")])
    assert tags["contention"] == "other processes kept 3.0 of 8 cores busy on node2"


def test_the_runs_own_cpu_use_is_per_device_and_the_hosts_is_its_busy_cores():
    # node1: ranks 0 and 1 used 30 s and 10 s of CPU (their workers' included) in 10 s of windows, the host
    # was busy 45 s; node2: rank 2 used 20 s, its host was busy 60 s.
    metrics, _ = contention([rank(0, 45.0, 30.0), rank(1, 44.0, 10.0), rank(2, 60.0, 20.0, hostname="node2")])
    assert metrics["cpu/cores_per_device"] == pytest.approx(2.0)  # (3 + 1 + 2) / 3 ranks
    assert metrics["host/busy_cores"] == pytest.approx(6.0)  # the busiest host's
    assert metrics["host/other_cpu_cores"] == pytest.approx(4.0)  # node2: 6 busy, 2 the run's
    none, _ = contention([rank(0, None, None)])  # no /proc: nothing said
    assert "cpu/cores_per_device" not in none and "host/busy_cores" not in none


def test_other_processes_on_a_runs_gpus_are_named():
    samples = [(0.0, 99.0, 10.0, 600.0, 1900.0, 60.0)]
    # rank 0's GPU shows it, another rank of the run, and one process more
    metrics, tags = contention([rank(0, 10.0, 10.0, gpu_pids=[100, 101, 4242], samples=samples),
                                rank(1, 10.0, 10.0, gpu_pids=[101], samples=samples)])
    assert metrics["gpu/other_processes"] == 1.0
    assert tags == {"contended": "true", "contention": "1 other process on rank 0's GPU (pid 4242)"}


def test_a_gpus_process_list_from_another_pid_namespace_counts_the_rank_once():
    assert host.other_gpu_processes([7, 9], own=[7]) == [9]
    assert host.other_gpu_processes([1234], own=[7]) == []  # NVML's host pids in a container: that one is the rank
    assert len(host.other_gpu_processes([1234, 99], own=[7])) == 1  # one of two is the rank: one other


def test_the_readings_come_from_proc():
    busy, own = host.busy_s(), host.tree_cpu_s(__import__("os").getpid())
    assert busy is not None and busy > 0 and own is not None and 0 < own <= busy
