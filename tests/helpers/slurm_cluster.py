"""Real SLURM clusters on this machine, for tests that submit jobs with sbatch/srun.

The session-scoped fixture `slurm_cluster` is one node on localhost; `slurm_two_nodes` is a
login host and two nodes, each a host of its own on a test network (tests/helpers/netns.py): slurmctld
and an MLflow server (launchers/mlflow_server.sh) run on the login host, one slurmd on each
node, and the cluster's commands (sbatch, python -m rn50) are run on the login host. Each
cluster runs its own munged, slurmctld and slurmd(s) from a temp dir (config, key, sockets,
state, logs), so it needs neither the system's munge or SLURM config nor their services; it
stops them at the end of the session.

tests/conftest.py imports the fixtures, so all test modules share each cluster.
"""
import functools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional

import pytest

from helpers import ROOT, netns
from helpers.servers import free_port
from helpers.store import empty_store_in

# The daemons live in sbin, which a non-root PATH often lacks.
SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "srun", "sinfo", "scontrol", "squeue", "scancel")
PARTITION = "debug"
# More CPUs than this 2-core machine has, so that two 2-task jobs (one CPU a task) and a little
# more run at once; SlurmdParameters=config_overrides makes slurmd accept the made-up count.
CPUS = 8
START_TIMEOUT_S = 60


def _here(argv: List[str]) -> List[str]:
    return list(argv)


@dataclass
class SlurmCluster:
    env: dict  # for sbatch/srun/sinfo: SLURM_CONF points here, no inherited SLURM_* job variables
    partition: str
    cpus: int
    node: str  # the (first) node's name, which is also SLURM_NODELIST in a job of one node
    workdir: Path  # slurm.conf and the daemons' logs (*.log); removed at the end of the session
    nodes: List[str] = field(default_factory=list)  # every node's name (its hostname)
    login: Callable[[List[str]], List[str]] = _here  # argv run where sbatch reaches slurmctld
    network: Optional["netns.Network"] = None  # the test network of a cluster of several hosts
    tracking_uri: str = ""  # the login host's MLflow server, where it has one
    mlflow_dir: Optional[Path] = None  # that server's sqlite store (mlflow.db) and artifacts/


def wait_until_held(cluster: SlurmCluster, job: str, running: Callable[[], None]) -> None:
    """Until SLURM holds the requeued job before its next start (PENDING, reason BeginTime), which
    it does once the last start has ended. running() fails the test if the command that waits on the
    job has ended meanwhile."""
    while True:
        state = subprocess.run(cluster.login(["squeue", "--noheader", "--format=%T %r", f"--jobs={job}"]),
                               env=cluster.env, capture_output=True, text=True).stdout.split()
        if state == ["PENDING", "BeginTime"]:
            return
        running()
        time.sleep(0.2)


def start_held(cluster: SlurmCluster, job: str) -> None:
    """Start a requeued job that SLURM holds (wait_until_held) now, not after the minutes of its
    hold, but in a later second than the one in which it was seen held. A node refuses a start whose
    credential is dated (in whole seconds) no later than the stop of the job's last start ("Job
    credential revoked" in slurmctld's log), and the job ends FAILED; that stop came before the hold.
    A start in the same second failed the USR1 requeue test so, in 1 of 9 runs here under load; CI's
    one failure of that test was consistent with it. (StartTime=now+2 would wait for SLURM's next
    scheduling pass, up to 30 s on.)"""
    time.sleep(1.05 - time.time() % 1.0)  # slurmctld runs on this host's clock
    subprocess.run(cluster.login(["scontrol", "update", f"JobId={job}", "StartTime=now"]),
                   env=cluster.env, check=True)


def _slurm_conf(d: Path, controller: str, nodes: Dict[str, str], munge_socket: Path,
                ctld_port: int, slurmd_port: int) -> str:
    """controller: SlurmctldHost's value; nodes: each node's name and address."""
    node_lines = "".join(f"NodeName={name} NodeAddr={addr} CPUs={CPUS} RealMemory=1024 State=UNKNOWN\n"
                         for name, addr in nodes.items())
    return f"""\
ClusterName=rn50test
SlurmctldHost={controller}
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
AuthType=auth/munge
AuthInfo=socket={munge_socket}
SlurmUser=root
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool-%n
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd-%n.pid
# No cgroups: plain process tracking works in containers and sandboxes too.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
# `sbatch --wait` polls every 2 s only while MinJobAge is under 6 s; with the default 300 s it sleeps
# 2, 8, then 32 s. 5 s still keeps a finished job's record past the next poll, which reads its exit code.
MinJobAge=5
MpiDefault=none
AccountingStorageType=accounting_storage/none
# Without a mailer the default MailProg is missing, and slurmctld logs that as an error.
MailProg=/bin/true
{node_lines}PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


def _tail(path: Path, lines: int = 30) -> str:
    text = path.read_text(errors="replace") if path.exists() else "(no log)"
    return "\n".join(text.splitlines()[-lines:])


class _Daemons:
    """The daemons started so far, each run in the foreground as our child, its output in a log."""

    def __init__(self, d: Path, env: dict):
        self.dir, self.env, self.procs = d, env, {}

    def start(self, name: str, *args: str, on: Callable[[List[str]], List[str]] = _here, binary: str = "") -> None:
        """The daemon `binary` (default: name) with args, run as on(argv): on a host of a test network."""
        with open(self.dir / f"{name}.log", "wb") as log:
            self.procs[name] = subprocess.Popen(
                on([shutil.which(binary or name, path=SEARCH_PATH), *args]),
                env=self.env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            )

    def check_alive(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                pytest.fail(f"{name} exited with {proc.returncode}; its log ends:\n{self.log_tail(name)}")

    def log_tail(self, name: str) -> str:
        return _tail(self.dir / f"{name}.log")

    def wait_for(self, what: str, ready, timeout_s: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while not ready():
            self.check_alive()
            if time.monotonic() > deadline:
                logs = "\n".join(f"--- {n}.log\n{self.log_tail(n)}" for n in self.procs)
                pytest.fail(f"SLURM test cluster: no {what} after {timeout_s} s\n{logs}")
            time.sleep(0.2)

    def stop(self) -> None:
        # Reverse order: slurmd first, munged last, as each needs the ones before it.
        for proc in reversed(self.procs.values()):
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _node_states(env: dict, on=_here) -> List[str]:
    out = subprocess.run(on(["sinfo", "--noheader", "--Node", "--format=%t"]),
                         env=env, capture_output=True, text=True)
    return out.stdout.split()


def _cancel_jobs(env: dict, on=_here) -> None:
    """Cancel what tests left running and wait for it to end: slurmstepd outlives slurmd otherwise."""
    subprocess.run(on(["scancel", f"--partition={PARTITION}"]), env=env, capture_output=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        out = subprocess.run(on(["squeue", "--noheader"]), env=env, capture_output=True, text=True)
        if out.returncode != 0 or not out.stdout.strip():
            return
        time.sleep(0.5)


def _missing() -> List[str]:
    return [b for b in BINARIES if shutil.which(b, path=SEARCH_PATH) is None]


@pytest.fixture(scope="session")
def slurm_cluster():
    missing = _missing()
    if missing:
        pytest.skip(f"SLURM/munge not installed (missing {', '.join(missing)}); .ci/run installs them")

    with tempfile.TemporaryDirectory(prefix="rn50-slurm-") as tmp:
        yield from _run_cluster(Path(tmp))


@pytest.fixture(scope="session")
def slurm_two_nodes():
    """login, node1 and node2 on a test network; the login host also serves MLflow."""
    missing = _missing()
    if missing:
        pytest.skip(f"SLURM/munge not installed (missing {', '.join(missing)}); .ci/run installs them")
    with netns.network_of(["login", "node1", "node2"]) as net, \
            tempfile.TemporaryDirectory(prefix="rn50-slurm2-") as tmp:
        yield from _run_cluster(Path(tmp), net)


def _key(d: Path) -> Path:
    """A munge key of our own: the packaged /etc/munge/munge.key may be missing or owned by user munge."""
    key = d / "munge.key"
    fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(os.urandom(1024))
    return key


def _run_cluster(d: Path, net: Optional["netns.Network"] = None):
    """One node on localhost, or (net) slurmctld on net's login host and a slurmd on each other host."""
    # munged wants every directory above its socket open to all: hence not pytest's tmp_path (0700).
    d.chmod(0o755)
    (d / "state").mkdir()
    key = _key(d)
    # Every host reaches munged by this path: a test network's hosts share the file system.
    munge_socket = d / "munge.socket"
    if net is None:
        node = socket.gethostname().split(".")[0]  # what slurmd takes as its node name
        controller, nodes, login = f"{node}(127.0.0.1)", {node: "127.0.0.1"}, _here
        ports = [free_port(), free_port()]  # free on every address: slurmctld and slurmd bind them all
        while ports[1] == ports[0]:
            ports[1] = free_port()
    else:
        login_host = net.hosts["login"]
        controller = f"{login_host.name}({login_host.address})"
        nodes = {h.name: h.address for h in net.hosts.values() if h is not login_host}
        login = functools.partial(net.argv, "login")
        ports = [6817, 6818]  # SLURM's own: each host has its ports to itself
    for name in nodes:
        (d / f"spool-{name}").mkdir()
    conf = d / "slurm.conf"
    conf.write_text(_slurm_conf(d, controller, nodes, munge_socket, *ports))

    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_", "SRUN_", "SALLOC_"))}
    env["SLURM_CONF"] = str(conf)
    daemons = _Daemons(d, env)
    try:
        daemons.start("munged", "--foreground", f"--socket={munge_socket}", f"--key-file={key}",
                      f"--pid-file={d}/munged.pid", f"--seed-file={d}/munged.seed", on=login)
        daemons.wait_for("munge socket", munge_socket.exists)
        daemons.start("slurmctld", "-D", "-f", str(conf), on=login)
        for name in nodes:
            on = _here if net is None else functools.partial(net.argv, name)
            daemons.start(f"slurmd-{name}" if net else "slurmd", "-D", "-f", str(conf), on=on, binary="slurmd")
        daemons.wait_for("idle nodes", lambda: _node_states(env, login) == ["idle"] * len(nodes))
        cluster = SlurmCluster(env=env, partition=PARTITION, cpus=CPUS, node=next(iter(nodes)), workdir=d,
                               nodes=list(nodes), login=login, network=net)
        if net is not None:
            cluster.mlflow_dir = d / "mlflow"
            cluster.tracking_uri = _serve_mlflow(daemons, net, cluster.mlflow_dir)
        yield cluster
    finally:
        if any(name.startswith("slurmd") for name in daemons.procs):
            _cancel_jobs(env, login)
        daemons.stop()


def _serve_mlflow(daemons: _Daemons, net: "netns.Network", folder: Path) -> str:
    """launchers/mlflow_server.sh on the login host, bound to its address on the test network."""
    folder.mkdir()
    empty_store_in(folder)  # made once a session: a fresh schema takes the server seconds
    address = net.hosts["login"].address
    daemons.env = {**daemons.env, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{daemons.env['PATH']}"}
    daemons.start("mlflow", "--host", address, "--port", "5000", "--workers", "1",
                  "--backend", f"sqlite:///{folder}/mlflow.db", "--artifacts", str(folder / "artifacts"),
                  on=functools.partial(net.argv, "login"), binary=str(ROOT / "launchers" / "mlflow_server.sh"))
    uri = f"http://{net.hosts['login'].name}:5000"
    probe = f"import urllib.request; urllib.request.urlopen({uri + '/health'!r}, timeout=5)"

    def answers() -> bool:
        return subprocess.run(net.argv("login", [sys.executable, "-c", probe]), capture_output=True).returncode == 0

    daemons.wait_for("MLflow server", answers, timeout_s=180)
    return uri
