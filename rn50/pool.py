"""cluster=local's ranks: processes kept warm between the runs of one process count.

Starting a rank costs seconds (Python, torch, Lightning, a CUDA context); a sweep's
points that share a world size and device kind reuse the same ranks. Each rank is a
`python -m rn50.rank --serve` process holding one end of a socket pair; the launcher
sends it a run's config and gets back ('ok', results) or ('error', line, kind).

Every point still fails alone: a rank that reports an error or dies takes its pool
down, and the next point gets fresh processes. The ranks ignore Ctrl-C; the launcher
kills them when it is interrupted, and a rank whose launcher is gone (killed outright)
ends itself within a second or two (rank.exit_with_parent). SIGTERM ends a rank at once.
While it runs a task, a rank's output goes to rank_log, so that its failure is one line
here. None of this imports torch.
"""

import atexit
import os
import pickle
import signal
import socket
import subprocess
import sys
import tempfile
import time
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from rn50.errors import RunFailed

POOL_ENV = "RN50_POOL_FD"  # rn50/rank/run.py reads it
GRACE_S = 10.0  # after one rank fails, how long the others get to report their own error


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_log(out: Path, rank: int) -> Path:
    """Where a rank's output goes while it runs a task: its traceback, warnings, libraries' messages."""
    return Path(out) / f"rank{rank}.log"


def _exit_reason(code: Optional[int]) -> Tuple[str, str]:
    """What ended a rank process, and the failure kind it gives the run: `killed by SIGKILL` for a
    signal, so that a sweep's report shows it, else `error`."""
    if code is not None and code < 0:
        name = signal.Signals(-code).name
        hint = " (the kernel's out-of-memory killer?)" if name == "SIGKILL" else ""
        return f"killed by {name}{hint}", f"killed by {name}"
    return f"exited with code {code}", "error"


def died(rank: int, code: Optional[int], out: Path) -> RunFailed:
    """The failure of a rank process that ended without a reply, naming what it wrote before."""
    reason, kind = _exit_reason(code)
    log = rank_log(out, rank)
    if log.is_file() and log.stat().st_size:
        return RunFailed(f"rank {rank} failed: {reason}; its output is in {log}", kind=kind, log=str(log))
    return RunFailed(f"rank {rank} failed: {reason}", kind=kind)


class RankPool:
    """`nprocs` rank processes of one world on this host."""

    def __init__(self, nprocs: int):
        self.nprocs = nprocs
        self.procs: List[subprocess.Popen] = []
        self.conns: List[Connection] = []
        port = _free_port()
        for rank in range(nprocs):
            mine, theirs = socket.socketpair()
            env = {**os.environ, POOL_ENV: str(theirs.fileno())}
            if nprocs > 1:  # what Lightning's own environment reads to join the ranks
                env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(nprocs),
                           RANK=str(rank), LOCAL_RANK=str(rank), NODE_RANK="0")
            self.procs.append(subprocess.Popen([sys.executable, "-m", "rn50.rank", "--serve"], env=env,
                                               pass_fds=[theirs.fileno()]))
            theirs.close()
            self.conns.append(Connection(mine.detach()))

    def submit(self, config_yaml: str, out: Path) -> None:
        """Send one run to every rank; a rank still starting reads it once it is ready."""
        self.out = out
        for conn in self.conns:
            try:
                conn.send({"config": config_yaml, "out": str(out)})
            except OSError:  # a rank that died: result() sees its end
                pass

    def result(self) -> list:
        """Rank 0's results of the run submitted, or RunFailed naming the failure that came first."""
        return self._collect()[0][1]

    def _collect(self) -> list:
        """One reply from every rank; once one fails, the others get GRACE_S to say why they did."""
        replies: Dict[int, tuple] = {}
        pending = dict(enumerate(self.conns))
        failed = False
        while pending:
            ready = wait(list(pending.values()), GRACE_S if failed else None)
            if not ready:  # the others are stuck in a collective the failed rank left
                break
            for rank, conn in list(pending.items()):
                if conn not in ready:
                    continue
                try:
                    reply = conn.recv()
                except (EOFError, OSError):
                    reply = ("died", time.time(), self._exit_code(rank))
                if reply[0] == "ready":  # warmed up; its answer comes next
                    continue
                replies[rank] = reply
                del pending[rank]
                failed = failed or reply[0] != "ok"
        if not failed:
            return [replies[r] for r in range(self.nprocs)]
        self.close(kill=True)
        raise self._failure(replies)

    def _exit_code(self, rank: int) -> Optional[int]:
        try:
            return self.procs[rank].wait(timeout=GRACE_S)
        except subprocess.TimeoutExpired:
            return None

    def _failure(self, replies: Dict[int, tuple]) -> RunFailed:
        """The failure that came first: a rank that fails leaves the others failing in their
        collectives a moment later, with errors that only say a peer went away."""
        # A rank killed by a signal (a segfault, the OOM killer) comes first: its end reaches this
        # process late, after the errors its peers raised when it vanished.
        rank, reply = min(((r, reply) for r, reply in replies.items() if reply[0] != "ok"),
                          key=lambda item: (not (item[1][0] == "died" and (item[1][2] or 0) < 0), item[1][1]))
        if reply[0] == "error":
            _, _, message, kind, log = reply
            return RunFailed(f"rank {rank} failed: {message}", kind=kind, log=log)
        return died(rank, reply[2], self.out)

    def close(self, kill: bool = False, wait_s: Optional[float] = 60) -> None:
        """Stop the ranks: ask them to leave (or kill them), and wait up to wait_s for each."""
        for conn in self.conns:
            try:
                if not kill:
                    conn.send(None)
                conn.close()
            except OSError:
                pass
        for proc in self.procs:
            if kill and proc.poll() is None:
                proc.kill()
        if wait_s:
            for proc in self.procs:
                try:
                    proc.wait(timeout=wait_s)
                except subprocess.TimeoutExpired:
                    proc.kill()
        else:
            _leaving.extend(self.procs)
        self.procs, self.conns = [], []

    @property
    def alive(self) -> bool:
        return bool(self.procs) and all(p.poll() is None for p in self.procs)


_pools: Dict[Tuple[int, str], RankPool] = {}
_leaving: List[subprocess.Popen] = []  # ranks told to stop, waited for at exit


def pool_for(nprocs: int, device: str) -> RankPool:
    """The warm pool of this world size and device kind, started if there is none. Only one
    pool lives at a time: idle ranks of another size would hold GPU memory and contexts that a
    fresh process would not see (and exclusive-process GPUs would refuse the new ranks)."""
    key = (nprocs, device)
    for other in [k for k in _pools if k != key]:
        _pools.pop(other).close()
    pool = _pools.get(key)
    if pool is not None and not pool.alive:
        pool.close(kill=True)
        pool = None
    if pool is None:
        pool = _pools[key] = RankPool(nprocs)
    return pool


def submit(nprocs: int, device: str, config_yaml: str, out: Path) -> Callable[[], list]:
    """Send a config to a warm pool now; the returned call waits for its results. A failure
    takes the pool down, so the next run starts fresh ranks."""
    pool = pool_for(nprocs, device)
    pool.submit(config_yaml, out)

    def result() -> list:
        try:
            return pool.result()
        except BaseException:
            pool.close(kill=True)
            raise

    return result


def close_all(wait: bool = True, kill: bool = False) -> None:
    """Stop every pool; without wait, the ranks leave while this process goes on."""
    while _pools:
        _pools.popitem()[1].close(kill=kill, wait_s=60 if wait else None)
    if wait:
        for proc in _leaving:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
        _leaving.clear()


atexit.register(close_all)


def run_once(prefix: Sequence[str], config_yaml: str, out: Path) -> list:
    """One rank in a process of its own, started through `prefix` (a profiler that launches
    programs itself); the task and reply travel as files."""
    with tempfile.TemporaryDirectory() as tmp:
        task, result = Path(tmp) / "task.pkl", Path(tmp) / "result.pkl"
        task.write_bytes(pickle.dumps({"config": config_yaml, "out": str(out)}))
        done = subprocess.run([*prefix, sys.executable, "-m", "rn50.rank", "--task", str(task),
                               "--result", str(result)])
        if result.exists():
            reply = pickle.loads(result.read_bytes())
            if reply[0] == "ok":
                return reply[1]
            raise RunFailed(f"rank 0 failed: {reply[2]}", kind=reply[3], log=reply[4])
    raise died(0, done.returncode, out)
