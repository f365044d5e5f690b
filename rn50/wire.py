"""Everything that crosses between the launcher and a rank: open this file first.

The launcher (`python -m rn50`, rn50/launcher/) never imports torch; a rank (`python -m rn50.rank`,
rn50/rank/) does. Between them travel only the values below, pickled over a socket pair
(cluster=local's warm pool, rn50/launcher/pool.py) or through files (the one-shot rank that
Nsight Compute starts, run_once here):

    launcher -> rank   Task(config, out), then Task(...) again for a warm rank's next run, or None: leave
    rank -> launcher   Ready() once warmed up, then one reply per task: Done(results) or Failed(...)
                       (Died(...) is the launcher's own note of a rank that ended without a reply)

The rank finds its socket in POOL_ENV and writes its output to rank_log(out, rank) while it runs a
task; Done carries rank 0's list of every rank's RankResult (the others send None). Under torchrun
and SLURM the launcher's process becomes the rank (rn50/rank/here.py) and the same RankResults
come back as a return value. Nothing here imports torch.
"""

import pickle
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

from rn50.errors import RunFailed
from rn50.measure.timing import Window

POOL_ENV = "RN50_POOL_FD"
"""The rank's end of its socket pair (a file descriptor), set by the pool."""


def rank_log(out: Path, rank: int) -> Path:
    """Where a rank's output goes while it runs a task: its traceback, warnings, libraries' messages."""
    return Path(out) / f"rank{rank}.log"


@dataclass
class RankResult:
    """One rank's share of a run."""

    rank: int
    node_rank: int
    local_rank: int
    hostname: str
    pid: int
    windows: List[Window]
    samples: List[tuple] = field(default_factory=list)
    """NVML samples of this rank's GPU in the measured windows (nvml.FIELDS); empty on CPUs."""
    energy_j: Optional[float] = None
    """Board energy of this rank's GPU over the measured windows (NVML's counter, else power samples)."""
    energy_source: Optional[str] = None
    """Where energy_j came from: the counter or the power samples."""
    batch_size: int = 0
    """Images per step on this rank: data.batch_size, or what data.batch_size=auto chose."""
    process_cpu_pct: Optional[float] = None
    """This process's CPU time over the windows' wall time, in % of one core."""
    cpu_cores: int = 1
    """Cores this process may run on (its affinity)."""
    first_step_at: float = 0.0
    """Wall-clock time (time.time()) when the first warm-up step began."""
    started: Dict[str, Optional[float]] = field(default_factory=dict)
    """Wall-clock times (time.time()) at which this rank reached each stage of its start before its first step,
    in order (rn50/measure/timing.py's STARTUP_STAGES); time/startup_<stage>_s are the gaps between them."""
    warmup_s: float = 0.0
    """Host seconds from the first warm-up step to the first measured window."""
    env_tags: Dict[str, str] = field(default_factory=dict)
    """Rank 0: software and GPU versions, as seen where the run ran."""
    flops_per_image: Optional[float] = None
    """Rank 0: forward plus backward FLOPs of one image."""
    metrics: Dict[str, float] = field(default_factory=dict)
    """Rank 0: what its callbacks measured beyond throughput (profilers)."""
    files: List[str] = field(default_factory=list)
    """Rank 0: files its callbacks wrote (profiler traces and reports)."""
    series: Dict[str, List[tuple]] = field(default_factory=dict)
    """Rank 0 of train=accuracy: each per-epoch metric as (epoch, value) pairs."""
    losses: List[float] = field(default_factory=list)
    """This rank's training loss at every step, warm-up and profiled steps included (rn50/measure/trained.py)."""
    skipped: Optional[List[float]] = field(default_factory=list)
    """1.0 for each step the loss scaler skipped, else 0.0; empty without a scaler, None from a
    scaler that does not keep them."""
    loss_scale: Optional[float] = None
    """The loss scale after the last step, where a scaler ran."""
    allreduce_ms: Optional[float] = None
    """A rank of several: one all-reduce of the gradients, timed after the last step (rn50/measure/comm.py)."""
    allreduce_before_ms: Optional[float] = None
    """The same all-reduce timed before the first step: beside allreduce_ms, whether the network changed."""
    allreduce_bytes: int = 0
    """The bytes that all-reduce carried: the network's gradients."""
    transport: Optional[str] = None
    """How NCCL reached the other ranks from this one (P2P/NVLink, SHM, NET/Socket, ...); gloo on CPUs."""
    gc_collections: int = 0
    """Garbage-collector passes inside the measured windows."""
    gc_ms: float = 0.0
    """Host milliseconds those passes took: the host queued no work meanwhile."""
    host_busy_s: Optional[float] = None
    """CPU seconds the whole host was busy over the windows (/proc/stat); None where it cannot say."""
    own_cpu_s: Optional[float] = None
    """CPU seconds this rank's processes (it and its children) used over the windows."""
    windows_wall_s: float = 0.0
    """Wall seconds from the first window's start to the last one's end."""
    gpu_pids: List[int] = field(default_factory=list)
    """Pids of the processes NVML showed on this rank's GPU at the windows' edges, the run's own included."""


@dataclass(frozen=True)
class Task:
    """One run for a rank: the resolved config as YAML, and the run's output directory."""

    config: str
    out: str


@dataclass(frozen=True)
class Ready:
    """A pool rank has its CUDA context (or found it cannot make one): its reply comes next."""


@dataclass(frozen=True)
class Done:
    """A task that ran to its end: rank 0's RankResults of every rank, None from the others."""

    results: Optional[List[RankResult]]


@dataclass(frozen=True)
class Failed:
    """A task that raised: one line naming the log that holds the traceback, and its failure kind."""

    at: float
    """time.time() when it failed: the first failure of a run is its cause."""
    message: str
    kind: str
    log: Optional[str]

    def error(self, rank: int) -> RunFailed:
        return RunFailed(f"rank {rank} failed: {self.message}", kind=self.kind, log=self.log)


@dataclass(frozen=True)
class Died:
    """A rank process that ended without a reply (the launcher's note): its exit code, negative for a signal."""

    at: float
    code: Optional[int]

    @property
    def by_signal(self) -> bool:
        return (self.code or 0) < 0

    def error(self, rank: int, out: Path) -> RunFailed:
        """The failure, naming what the rank wrote before it ended."""
        reason, kind = exit_reason(self.code)
        log = rank_log(out, rank)
        if log.is_file() and log.stat().st_size:
            return RunFailed(f"rank {rank} failed: {reason}; its output is in {log}", kind=kind, log=str(log))
        return RunFailed(f"rank {rank} failed: {reason}", kind=kind)


Reply = Union[Done, Failed, Died]


def exit_reason(code: Optional[int]) -> Tuple[str, str]:
    """What ended a rank process, and the failure kind it gives the run: `killed by SIGKILL` for a
    signal, so that a sweep's report shows it, else `error`."""
    if code is not None and code < 0:
        name = signal.Signals(-code).name
        hint = " (the kernel's out-of-memory killer?)" if name == "SIGKILL" else ""
        return f"killed by {name}{hint}", f"killed by {name}"
    return f"exited with code {code}", "error"


def run_once(prefix: Sequence[str], task: Task) -> Optional[List[RankResult]]:
    """One rank in a process of its own, started through `prefix` (a profiler that launches programs
    itself, rn50/profiling/ncu.py); the task and its reply travel as files."""
    with tempfile.TemporaryDirectory() as tmp:
        task_file, result_file = Path(tmp) / "task.pkl", Path(tmp) / "result.pkl"
        task_file.write_bytes(pickle.dumps(task))
        done = subprocess.run([*prefix, sys.executable, "-m", "rn50.rank", "--task", str(task_file),
                               "--result", str(result_file)])
        if result_file.exists():
            reply = pickle.loads(result_file.read_bytes())
            if isinstance(reply, Done):
                return reply.results
            raise reply.error(0)
    raise Died(0.0, done.returncode).error(0, Path(task.out))
