"""What a run's gradient all-reduce costs on its own, timed as nccl-tests times it, and the
transport NCCL chose between the ranks.

A rank of several times an all-reduce before its first step and again after its last
(rn50/rank/throughput.py, with rn50/measure/device.py's allreduce_ms), never inside a measured window:
warm-up all-reduces, then bench.comm_iters back to back between two synchronized edges, of one buffer
the size of the network's gradients. The second is the run's figure; the first says whether the network
changed under the run. This module is the torch-free part, which the launcher sums up with. The bus
bandwidth follows nccl-tests' definition (its doc/PERFORMANCE.md): bytes / time x 2(n-1)/n, the
rate each link must carry in a ring all-reduce, comparable across rank counts and with the link's.

NCCL says which transport each channel took only in its INFO log ("Channel 00/0 : 0[0] -> 1[1]
via P2P/CUMEM"). `log_transports` turns that log on for a rank's process into a file of its own,
where the user has not set NCCL_DEBUG, and `transports` reads it back.
"""

import atexit
import contextlib
import os
import re
import tempfile
from typing import Dict, Iterable, Mapping, Optional

NCCL_LOG_ENV = "RN50_NCCL_LOG"  # where this process's NCCL INFO log goes, when rn50 asked for one
# NCCL's words for a channel's transport, as its INFO log writes them: P2P, SHM, NET/Socket, NET/IB, ...
VIA = re.compile(r" via (P2P|SHM|NET/[A-Za-z]+|COLLNET\w*|NVLS\w*)")
# The network changed under a run when its all-reduce took over this much longer or shorter after the
# windows than before the warm-up, and the difference was over this share of a step: NCCL on sockets over
# loopback took 43.9 to 58.3 ms across six runs of one call, minutes apart (docs/benchmarks.md, twentieth
# session), where NVLink's 0.4 to 0.5 ms moves by a far smaller share of a step.
NETWORK_CHANGE_PCT = 20.0
NETWORK_CHANGE_STEP_PCT = 2.0


def bus_bandwidth_GBps(nbytes: float, ms: float, world: int) -> float:
    """nccl-tests' bus bandwidth of an all-reduce: algorithm bandwidth (bytes / time) x 2(n-1)/n."""
    return nbytes / (ms / 1e3) * 2 * (world - 1) / world / 1e9


def allreduce_metrics(ms: float, before_ms: Optional[float], nbytes: int, world: int) -> Dict[str, float]:
    """A run's comm/ metrics from its slowest rank's all-reduce after the windows (ms) and before the warm-up
    (before_ms, None where it was not timed), of nbytes over world ranks: rn50's runs and the bare loop's."""
    metrics = {"comm/allreduce_ms": ms, "comm/busbw_GBps": bus_bandwidth_GBps(nbytes, ms, world),
               "comm/gradient_MB": nbytes / 1e6}
    if before_ms:  # the network as the run found it, and how much it moved by the end
        metrics["comm/allreduce_before_ms"] = before_ms
        metrics["comm/allreduce_change_pct"] = change_pct(before_ms, ms)
    return metrics


def change_pct(before_ms: float, after_ms: float) -> float:
    """How much longer (or, negative, shorter) the all-reduce took after the windows than before the warm-up, in %."""
    return 100.0 * (after_ms - before_ms) / before_ms


def network_changed(metrics: Mapping[str, float]) -> Optional[bool]:
    """Whether the all-reduce after the windows differs from the one before the warm-up by over
    NETWORK_CHANGE_PCT and over NETWORK_CHANGE_STEP_PCT of a step; None where a run has not both."""
    before, after = metrics.get("comm/allreduce_before_ms"), metrics.get("comm/allreduce_ms")
    step = metrics.get("step_time/median_ms")
    if not before or not after or not step:
        return None
    return (abs(change_pct(before, after)) > NETWORK_CHANGE_PCT
            and 100.0 * abs(after - before) / step > NETWORK_CHANGE_STEP_PCT)


def network_change_note(metrics: Mapping[str, float]) -> str:
    """'the network changed during the run: the all-reduce took 43.90 ms before the warm-up and 58.30 ms
    after the windows (+32.8%), 16.0% of a step', or '' (a run whose network held, or with one timing)."""
    if not network_changed(metrics):
        return ""
    before, after = metrics["comm/allreduce_before_ms"], metrics["comm/allreduce_ms"]
    of_step = 100.0 * abs(after - before) / metrics["step_time/median_ms"]
    return (f"the network changed during the run: the all-reduce took {before:.2f} ms before the warm-up and "
            f"{after:.2f} ms after the windows ({change_pct(before, after):+.1f}%), {of_step:.1f}% of a step")


def log_transports() -> None:
    """Before NCCL starts in this process: its INFO log of the INIT subsystem into a file of this
    process's own, removed at exit, unless the user set NCCL_DEBUG (their log is theirs: the
    transport is then not recorded). NCCL reads these variables once, when its first communicator
    is made, and truncates the file then; a process that never starts NCCL writes none."""
    ours = os.environ.get(NCCL_LOG_ENV)  # inherited from a process of rn50's: this one logs apart
    if "NCCL_DEBUG" in os.environ and not (ours and os.environ.get("NCCL_DEBUG_FILE") == ours):
        return
    path = os.path.join(tempfile.gettempdir(), f"rn50-nccl-{os.getpid()}.log")
    os.environ.update(NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT", NCCL_DEBUG_FILE=path, **{NCCL_LOG_ENV: path})
    atexit.register(_remove, path)


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.remove(path)


def transports(nvlink: Optional[bool] = None) -> Optional[str]:
    """The transports NCCL's channels took from this process, as NCCL names them, sorted and joined
    by "+": "P2P", "NET/Socket", "P2P+NET/IB"; P2P says "P2P/NVLink" or "P2P/PCIe" where nvlink
    (whether this GPU has an active NVLink) is known. None where NCCL logged none (no NCCL, or
    the user's own NCCL_DEBUG)."""
    path = os.environ.get(NCCL_LOG_ENV)
    if not path or not os.path.isfile(path):
        return None
    with open(path, errors="replace") as f:
        found = set(VIA.findall(f.read()))
    if not found:
        return None
    if "P2P" in found and nvlink is not None:
        found = (found - {"P2P"}) | {"P2P/NVLink" if nvlink else "P2P/PCIe"}
    return "+".join(sorted(found))


def joined(per_rank: Iterable[Optional[str]]) -> Optional[str]:
    """The transports of every rank as one: "P2P/NVLink+NET/Socket" for two nodes of NVLinked GPUs."""
    found = {t for kinds in per_rank if kinds for t in kinds.split("+")}
    return "+".join(sorted(found)) or None
