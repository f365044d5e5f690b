"""A process as others find it again: its host, its pid and when it started, so that a pid the
kernel has handed to a new process since is not taken for it. A run's directory and its MLflow
run record their launcher this way (rn50/launcher/rundir.py, rn50/launcher/lifecycle.py)."""

import os
import socket
from typing import Dict, List, Optional


def stat_fields(pid) -> Optional[List[str]]:
    """/proc/PID/stat's fields after the command name (which may hold spaces): the state first, then
    the parent's pid, ...; None where the process is gone or the host has no /proc."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def started(pid: int) -> Optional[str]:
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


def me() -> Dict[str, str]:
    """This process: host, pid, start, and the host's boot and the pid namespace its pid is one of."""
    return {"host": socket.gethostname(), "pid": str(os.getpid()), "started": started(os.getpid()) or "",
            "boot": _read("/proc/sys/kernel/random/boot_id"), "pidns": _pid_namespace()}


def alive(owner: Dict[str, str]) -> Optional[bool]:
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
    now = started(pid)
    return now is not None and (not owner.get("started") or now == owner["started"])


def describe(owner: Dict[str, str]) -> str:
    """'pid 4242 on node1'."""
    return f"pid {owner.get('pid', '?')} on {owner.get('host', '?')}"
