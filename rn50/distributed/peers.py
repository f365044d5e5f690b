"""The ranks of a run as peers on a network: how each joins the others (the rank half of the
cluster options, rn50/options/clusters.py: the Lightning cluster environment that says who started
a rank, and torch's default process group as Lightning's DDP would start it), the interface they
talk over (dist.interface), and which rank a failed collective lost.

Every rank tells the others its hostname and addresses once, when DDP has joined them (before
the warm-up, outside the measured windows). When a peer dies, gloo fails rank 0's collective
with the address of the connection that closed ("Connection closed by peer [198.18.29.12]:56502");
`lost` turns that into the rank and node that went: one line, instead of an address.
"""

import contextlib
import fcntl
import os
import re
import socket
import struct
from dataclasses import dataclass
from typing import FrozenSet, List, Optional

import torch.distributed as dist
from pytorch_lightning.plugins.environments import LightningEnvironment, SLURMEnvironment, TorchElasticEnvironment
from pytorch_lightning.strategies import DDPStrategy
from torch import nn
from torch.distributed.constants import default_pg_timeout
from torch.nn.parallel import DistributedDataParallel

from rn50.slurm.sbatch import REQUEUE_SIGNAL

# Read by torch's gloo and by NCCL when a process group starts: the interface their sockets use.
INTERFACE_ENVS = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")
# An address in gloo's errors: [10.1.2.3]:port or [fe80::1]:port.
PEER_ADDRESS = re.compile(r"\[([0-9A-Fa-f.:]+)\]:\d+")
# gloo's source position before its message.
GLOO_SOURCE = re.compile(r"^\[[^\]]*\.(?:cc|h|cpp):\d+\]\s*")


@dataclass(frozen=True)
class Peer:
    rank: int
    node_rank: int
    hostname: str
    addresses: FrozenSet[str]


_roster: List[Peer] = []  # every rank of this process's run, once DDP has joined them


def use_interface(cfg) -> None:
    """dist.interface: the network interface gloo and NCCL use on every node, in place of the
    address each one derives from the hostname (gloo) or picks itself (NCCL)."""
    if cfg.dist.interface:
        for name in INTERFACE_ENVS:
            os.environ[name] = cfg.dist.interface


def _interface_address(name: str) -> Optional[str]:
    """The IPv4 address of a network interface (SIOCGIFADDR), or None where it has none."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s, contextlib.suppress(OSError):
        packed = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name[:15].encode()))
        return socket.inet_ntoa(packed[20:24])
    return None


def _own_addresses(hostname: str) -> FrozenSet[str]:
    """Where the others reach this rank: its hostname's addresses and its interface's."""
    found = set()
    with contextlib.suppress(OSError):
        found |= {info[4][0] for info in socket.getaddrinfo(hostname, None)}
    for name in os.environ.get("GLOO_SOCKET_IFNAME", "").split(","):
        address = _interface_address(name) if name else None
        if address:
            found.add(address)
    return frozenset(found)


class RosterDDP(DDPStrategy):
    """Lightning's DDP, built on the current stream, and each rank's hostname and addresses gathered
    once the ranks have joined."""

    def _setup_model(self, model: nn.Module) -> DistributedDataParallel:
        """DDP as plain PyTorch builds it, on the stream the rank trains on. Lightning 2.6 builds it
        inside a CUDA stream of its own making; with that, a DDP step on 2 H200s over NVLink ran
        1.2% slower than this one (11,571 against 11,713 images/sec, GPU busy 98.6% against 99.8%:
        the device idled with work queued), and 0.982 of the bare DDP loop against 0.995
        (docs/benchmarks.md, issue 42)."""
        return DistributedDataParallel(module=model, device_ids=self.determine_ddp_device_ids(), **self._ddp_kwargs)

    def setup_distributed(self) -> None:
        super().setup_distributed()
        hostname = socket.gethostname()
        me = Peer(self.global_rank, self.node_rank, hostname, _own_addresses(hostname))
        everyone: list = [None] * dist.get_world_size()
        dist.all_gather_object(everyone, me)
        _roster[:] = everyone


def _short(name: str) -> str:
    return name.split(".")[0]


def lost(message: str) -> Optional[str]:
    """'lost rank 1 on node2 (node 1): Connection closed by peer [198.18.29.12]:56502' for a
    collective that failed because a peer went away; None for any other error."""
    found = PEER_ADDRESS.search(message)
    if not found or not _roster:
        return None
    address, mine = found.group(1), dist.get_rank() if dist.is_initialized() else 0
    ranks = [p for p in _roster if address in p.addresses and p.rank != mine]
    if not ranks:  # an address the rank did not know it had: ask the resolver for its name
        with contextlib.suppress(OSError):
            name = _short(socket.gethostbyaddr(address)[0])
            ranks = [p for p in _roster if _short(p.hostname) == name and p.rank != mine]
    if not ranks:
        return None
    which = f"rank {ranks[0].rank}" if len(ranks) == 1 else f"one of ranks {', '.join(str(p.rank) for p in ranks)}"
    what = GLOO_SOURCE.sub("", message)
    sentence_end = what.find(". ", found.end() - (len(message) - len(what)))  # gloo's advice follows
    what = what[:sentence_end] if sentence_end >= 0 else what.rstrip(".")
    return f"lost {which} on {ranks[0].hostname} (node {ranks[0].node_rank}): {what}"


# How a rank joins the others: the cluster options' rank half.
def started_by_rn50() -> list:
    """rn50's pool started the ranks: Lightning would otherwise take SLURM's variables over rn50's
    whenever a SLURM allocation surrounds a local run."""
    return [LightningEnvironment()]


def torchrun() -> list:
    """torchrun's environment, where torchrun started this process; else none."""
    return [TorchElasticEnvironment()] if TorchElasticEnvironment.detect() else []


def slurm(requeue: bool) -> SLURMEnvironment:
    """SLURM's environment; a train=accuracy run (requeue) is requeued on REQUEUE_SIGNAL and resumes."""
    return SLURMEnvironment(auto_requeue=requeue, requeue_signal=REQUEUE_SIGNAL)


def join_from_env(backend: str, device_id) -> None:
    """From the env:// variables (RANK, WORLD_SIZE, MASTER_*) that rn50's pool and torchrun set."""
    dist.init_process_group(backend, timeout=default_pg_timeout, device_id=device_id)


def join_from_slurm(backend: str, device_id) -> None:
    """From SLURM's variables, read as Lightning's SLURM environment reads them."""
    env = SLURMEnvironment(auto_requeue=False)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = env.main_address, str(env.main_port)
    dist.init_process_group(backend, rank=env.global_rank(), world_size=env.world_size(),
                            timeout=default_pg_timeout, device_id=device_id)
