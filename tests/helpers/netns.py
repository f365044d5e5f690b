"""A test network of hosts on this machine, for tests of runs that span more than one host.

Each host is a network namespace of its own, whose one interface, eth0, is a veth link to a
bridge in another namespace (the switch); every process started on a host also gets a UTS
namespace with the host's name as its hostname, and a mount namespace in which /etc/hosts names
every host, as a cluster's DNS would (the rest of the file system is shared, as a cluster's
network file system would be). Addresses exist only on those links, inside namespaces made
here, and no namespace has a default route: nothing leaves the test network. `network_of`
removes all of it, the processes left in it included, however the test ends.

It needs root, iproute2's `ip netns` and util-linux's nsenter and unshare; without them the
tests that use it are skipped.
"""
import contextlib
import itertools
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List, Sequence

import pytest

# 198.18.0.0/15 is set aside for benchmarking networks (RFC 2544): on no network this machine is on.
SUBNET = "198.18.29"
PREFIX = 24
_made = itertools.count()


@dataclass
class Host:
    name: str  # its hostname, which every host's /etc/hosts maps to address
    netns: str
    address: str
    interface: str = "eth0"  # its one link to the bridge


class Network:
    """Hosts joined by a bridge; `argv` runs a command on one of them."""

    def __init__(self, names: Sequence[str]):
        tag = f"rn50-{os.getpid()}-{next(_made)}"  # each network of each test session its own
        self.switch = f"{tag}-switch"
        self.hosts: Dict[str, Host] = {
            name: Host(name, f"{tag}-{name}", f"{SUBNET}.{10 + i}") for i, name in enumerate(names)}
        self.made: List[str] = []  # namespaces made so far, for the teardown
        self.folder = Path(tempfile.mkdtemp(prefix=f"{tag}-"))
        self.hosts_path = self.folder / "hosts"

    def argv(self, host: str, argv: Sequence[str]) -> List[str]:
        """argv run on the host: in its network namespace, under its hostname, with the network's
        /etc/hosts. (Not `ip netns exec`: its fresh /sys has no /sys/fs/cgroup, which slurmd needs.)"""
        h = self.hosts[host]
        script = 'mount --bind "$1" /etc/hosts && hostname "$0" && shift && exec "$@"'
        return ["nsenter", f"--net=/run/netns/{h.netns}", "unshare", "--uts", "--mount", "sh", "-c", script,
                h.name, str(self.hosts_path), *argv]

    def pids(self, host: str) -> List[int]:
        """Every process on the host."""
        done = subprocess.run(["ip", "netns", "pids", self.hosts[host].netns], capture_output=True, text=True)
        return [int(p) for p in done.stdout.split()]

    def hosts_file(self) -> str:
        return "127.0.0.1 localhost\n" + "".join(f"{h.address} {h.name}\n" for h in self.hosts.values())

    def build(self) -> None:
        self.hosts_path.write_text(self.hosts_file())
        ip("netns", "add", self.switch)
        self.made.append(self.switch)
        ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        ip("-n", self.switch, "link", "set", "br0", "up")
        for h in self.hosts.values():
            ip("netns", "add", h.netns)
            self.made.append(h.netns)
            port = f"to-{h.name}"[:15]
            ip("-n", self.switch, "link", "add", port, "type", "veth", "peer", "name", h.interface, "netns", h.netns)
            ip("-n", self.switch, "link", "set", port, "master", "br0", "up")
            ip("-n", h.netns, "addr", "add", f"{h.address}/{PREFIX}", "dev", h.interface)
            ip("-n", h.netns, "link", "set", h.interface, "up")
            ip("-n", h.netns, "link", "set", "lo", "up")

    def close(self) -> None:
        """Kill what still runs on the hosts, then remove the namespaces, their links and files."""
        for netns in self.made:
            _kill_all(netns)
        for netns in self.made:
            subprocess.run(["ip", "netns", "del", netns], capture_output=True)
        shutil.rmtree(self.folder, ignore_errors=True)


def ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise OSError(f"ip {' '.join(args)}: {done.stderr.strip()}")


def _kill_all(netns: str, timeout_s: float = 30) -> None:
    """SIGKILL every process in the namespace and wait until none is left (a namespace whose
    processes live on outlasts `ip netns del`)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True)
        pids = [int(p) for p in done.stdout.split()]
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)


def unavailable() -> str:
    """Why a test network cannot be made here, or ''."""
    if os.geteuid() != 0:
        return "a test network of namespaces needs root"
    missing = [b for b in ("ip", "nsenter", "unshare", "mount") if shutil.which(b) is None]
    if missing:
        return f"a test network of namespaces needs {', '.join(missing)} (iproute2, util-linux)"
    return ""


@contextlib.contextmanager
def network_of(names: Sequence[str]) -> Iterator["Network"]:
    """The hosts `names`, joined by a bridge, for the block; skips the test where they cannot be made."""
    why = unavailable()
    if why:
        pytest.skip(why)
    net = Network(names)
    try:
        try:
            net.build()
        except OSError as exc:
            if not net.made:  # a kernel or sandbox without network namespaces
                pytest.skip(f"no test network here: {exc}")
            raise
        yield net
    finally:
        net.close()
