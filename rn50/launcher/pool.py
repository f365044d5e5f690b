"""cluster=local's ranks: processes kept warm between the runs of one process count.

Starting a rank costs seconds (Python, torch, Lightning, a CUDA context); a sweep's
points that share a world size and device kind reuse the same ranks. Each rank is a
`python -m rn50.rank --serve` process holding one end of a socket pair; the launcher
sends it a wire.Task and gets back wire.Done or wire.Failed (rn50/wire.py).

Every point still fails alone: a rank that reports an error or dies takes its pool
down, and the next point gets fresh processes. The ranks ignore Ctrl-C; the launcher
kills them when it is interrupted, and a rank whose launcher is gone (killed outright)
ends itself within a second or two (rank.exit_with_parent). SIGTERM ends a rank at once.
While it runs a task, a rank's output goes to wire.rank_log, so that its failure is one line
here. None of this imports torch.
"""

import atexit
import os
import socket
import subprocess
import sys
import time
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

from rn50.errors import RunFailed
from rn50.wire import POOL_ENV, Died, Done, Failed, Ready, Reply, Task

GRACE_S = 10.0  # after one rank fails, how long the others get to report their own error


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
                conn.send(Task(config_yaml, str(out)))
            except OSError:  # a rank that died: result() sees its end
                pass

    def result(self) -> list:
        """Rank 0's results of the run submitted, or RunFailed naming the failure that came first."""
        return self._collect()[0]

    def _collect(self) -> list:
        """One reply from every rank; once one fails, the others get GRACE_S to say why they did."""
        replies: Dict[int, Reply] = {}
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
                    reply = Died(time.time(), self._exit_code(rank))
                if isinstance(reply, Ready):  # warmed up; its answer comes next
                    continue
                replies[rank] = reply
                del pending[rank]
                failed = failed or not isinstance(reply, Done)
        if not failed:
            return [replies[r].results for r in range(self.nprocs)]
        self.close(kill=True)
        raise self._failure(replies)

    def _exit_code(self, rank: int) -> Optional[int]:
        try:
            return self.procs[rank].wait(timeout=GRACE_S)
        except subprocess.TimeoutExpired:
            return None

    def _failure(self, replies: Dict[int, Reply]) -> RunFailed:
        """The failure that came first: a rank that fails leaves the others failing in their
        collectives a moment later, with errors that only say a peer went away."""
        # A rank killed by a signal (a segfault, the OOM killer) comes first: its end reaches this
        # process late, after the errors its peers raised when it vanished.
        rank, reply = min(((r, reply) for r, reply in replies.items() if not isinstance(reply, Done)),
                          key=lambda item: (not (isinstance(item[1], Died) and item[1].by_signal), item[1].at))
        if isinstance(reply, Failed):
            return reply.error(rank)
        return reply.error(rank, self.out)

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

