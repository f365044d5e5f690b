"""This host's processes. Who a process is, as others find it again: its host, its pid and when it
started, so that a pid the kernel has handed to a new process since is not taken for it; a run's
directory and its MLflow run record their launcher this way (rn50/launcher/rundir.py,
rn50/tracking/runs.py). And what else ran beside a run: the host's CPU time against the run's own
processes', and the other processes on its GPUs, both read at the measured windows' edges
(rn50/rank/throughput.py); a figure taken while something else loaded the host or the GPU is kept,
and tagged contended=true with what was found (rn50/results/summary.py). No torch here: the launcher
imports it too (its run directory, its runs' owners, and the sum of the ranks' readings)."""

import os
import socket
from typing import Dict, Iterable, List, Optional


# Who a process is, as others find it again.
def stat_fields(pid) -> Optional[List[str]]:
    """/proc/PID/stat's fields after the command name (which may hold spaces): the state first, then
    the parent's pid, ...; None where the process is gone or the host has no /proc."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def process_started(pid: int) -> Optional[str]:
    """When process `pid` of this host started, in clock ticks since boot (/proc/PID/stat's 22nd
    field); None where it is gone or the host has no /proc."""
    fields = stat_fields(pid)
    return fields[19] if fields else None


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def _pid_namespace() -> str:
    """Which pid namespace this process sees (containers on one host each have their own): '' without /proc."""
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return ""


def this_process() -> Dict[str, str]:
    """This process: host, pid, start, and the host's boot and the pid namespace its pid is one of."""
    return {"host": socket.gethostname(), "pid": str(os.getpid()), "started": process_started(os.getpid()) or "",
            "boot": _read("/proc/sys/kernel/random/boot_id"), "pidns": _pid_namespace()}


def owner_alive(owner: Dict[str, str]) -> Optional[bool]:
    """Whether the recorded process still runs. None where this process cannot tell: another host, or
    another pid namespace of this one (a container sharing the host's name), or no /proc. False where
    the host has booted since, or its pid is gone or now belongs to a process that started later."""
    if owner.get("host") != socket.gethostname() or not os.path.isdir("/proc"):
        return None
    if owner.get("boot") and owner["boot"] != _read("/proc/sys/kernel/random/boot_id"):
        return False
    if owner.get("pidns") != _pid_namespace():  # recorded without one (an older rn50), or another container's
        return None
    try:
        pid = int(owner.get("pid", ""))
    except ValueError:
        return None
    now = process_started(pid)
    return now is not None and (not owner.get("started") or now == owner["started"])


def describe_owner(owner: Dict[str, str]) -> str:
    """'pid 4242 on node1'."""
    return f"pid {owner.get('pid', '?')} on {owner.get('host', '?')}"


# What else ran beside a run.

# CPU time of other processes, over the windows, above which a run counts as contended: half a core,
# or a tenth of the host's cores where that is more (a host's own daemons stay under it).
OTHER_CORES_MIN = 0.5
OTHER_SHARE_MIN = 0.1
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def busy_s() -> Optional[float]:
    """CPU seconds this host's cores have been busy since boot (/proc/stat: all but idle and iowait);
    None without /proc."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / _TICK  # user..steal: guest time is inside user already


def tree_cpu_s(root: int) -> Optional[float]:
    """CPU seconds used so far by process `root` and every process below it (its DataLoader workers, a
    pool's children); None without /proc."""
    if not os.path.isdir("/proc"):
        return None
    stats = {pid: stat for pid in os.listdir("/proc") if pid.isdigit() and (stat := stat_fields(pid))}
    children: Dict[str, List[str]] = {}
    for pid, stat in stats.items():
        children.setdefault(stat[1], []).append(pid)  # the field after the state: the parent's pid
    total, todo = 0.0, [str(root)]
    while todo:
        pid = todo.pop()
        if pid in stats:
            total += (int(stats[pid][11]) + int(stats[pid][12])) / _TICK  # utime, stime
        todo += children.get(pid, [])
    return total


def other_cores(host_busy_s: float, own_cpu_s: float, wall_s: float) -> float:
    """Cores other processes kept busy on average over wall_s: the host's busy time less the run's own."""
    return max(0.0, host_busy_s - own_cpu_s) / wall_s if wall_s > 0 else 0.0


def cpu_contended(others: float, cores: int) -> bool:
    return others > max(OTHER_CORES_MIN, OTHER_SHARE_MIN * cores)


def other_gpu_processes(seen: Iterable[int], own: Iterable[int]) -> List[int]:
    """The pids NVML showed on a rank's GPU that are not the run's own processes, sorted. In a container
    NVML may give the host's pids: where none of the run's is among them, one of them is the rank."""
    seen, own = set(seen), set(own)
    others = sorted(seen - own)
    return others[1:] if others and not seen & own else others


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
