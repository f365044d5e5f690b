"""A real one-node SLURM cluster on this machine, for tests that submit jobs with sbatch/srun.

The session-scoped fixture `slurm_cluster` runs its own munged, slurmctld and slurmd from a
temp dir (config, key, sockets, state, logs), so it needs neither the system's munge or SLURM
config nor their services; it stops them at the end of the session.

tests/conftest.py imports the fixture, so all test modules share one cluster.
"""
import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

# The daemons live in sbin, which a non-root PATH often lacks.
SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "srun", "sinfo", "scontrol", "squeue", "scancel")
PARTITION = "debug"
# More CPUs than this 2-core machine has, so that two 2-task jobs (one CPU a task) and a little
# more run at once; SlurmdParameters=config_overrides makes slurmd accept the made-up count.
CPUS = 8
START_TIMEOUT_S = 60


@dataclass
class SlurmCluster:
    env: dict  # for sbatch/srun/sinfo: SLURM_CONF points here, no inherited SLURM_* job variables
    partition: str
    cpus: int
    node: str  # the node's name, which is also SLURM_NODELIST in a job
    workdir: Path  # slurm.conf and the daemons' logs (*.log); removed at the end of the session


def _free_port() -> int:
    # Port 0 lets the kernel pick a port nothing listens on; slurmctld and slurmd bind all addresses.
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _slurm_conf(d: Path, node: str, munge_socket: Path) -> str:
    ctld_port = _free_port()
    slurmd_port = _free_port()
    while slurmd_port == ctld_port:
        slurmd_port = _free_port()
    return f"""\
ClusterName=rn50test
SlurmctldHost={node}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
AuthType=auth/munge
AuthInfo=socket={munge_socket}
SlurmUser=root
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
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
NodeName={node} NodeAddr=127.0.0.1 CPUs={CPUS} RealMemory=1024 State=UNKNOWN
PartitionName={PARTITION} Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


def _tail(path: Path, lines: int = 30) -> str:
    text = path.read_text(errors="replace") if path.exists() else "(no log)"
    return "\n".join(text.splitlines()[-lines:])


class _Daemons:
    """The daemons started so far, each run in the foreground as our child, its output in a log."""

    def __init__(self, d: Path, env: dict):
        self.dir, self.env, self.procs = d, env, {}

    def start(self, name: str, *args: str) -> None:
        with open(self.dir / f"{name}.log", "wb") as log:
            self.procs[name] = subprocess.Popen(
                [shutil.which(name, path=SEARCH_PATH), *args],
                env=self.env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            )

    def check_alive(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                pytest.fail(f"{name} exited with {proc.returncode}; its log ends:\n{self.log_tail(name)}")

    def log_tail(self, name: str) -> str:
        return _tail(self.dir / f"{name}.log")

    def wait_for(self, what: str, ready) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not ready():
            self.check_alive()
            if time.monotonic() > deadline:
                logs = "\n".join(f"--- {n}.log\n{self.log_tail(n)}" for n in self.procs)
                pytest.fail(f"SLURM test cluster: no {what} after {START_TIMEOUT_S} s\n{logs}")
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


def _node_state(env: dict) -> str:
    out = subprocess.run(["sinfo", "--noheader", "--Node", "--format=%t"],
                         env=env, capture_output=True, text=True)
    return out.stdout.strip()


def _cancel_jobs(env: dict) -> None:
    """Cancel what tests left running and wait for it to end: slurmstepd outlives slurmd otherwise."""
    subprocess.run(["scancel", f"--partition={PARTITION}"], env=env, capture_output=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        out = subprocess.run(["squeue", "--noheader"], env=env, capture_output=True, text=True)
        if out.returncode != 0 or not out.stdout.strip():
            return
        time.sleep(0.5)


@pytest.fixture(scope="session")
def slurm_cluster():
    missing = [b for b in BINARIES if shutil.which(b, path=SEARCH_PATH) is None]
    if missing:
        pytest.skip(f"SLURM/munge not installed (missing {', '.join(missing)}); .ci/run installs them")

    with tempfile.TemporaryDirectory(prefix="rn50-slurm-") as tmp:
        yield from _run_cluster(Path(tmp))


def _run_cluster(d: Path):
    # munged wants every directory above its socket open to all: hence not pytest's tmp_path (0700).
    d.chmod(0o755)
    (d / "state").mkdir()
    (d / "spool").mkdir()
    # A key of our own: the packaged /etc/munge/munge.key may be missing or owned by user munge.
    key = d / "munge.key"
    fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(os.urandom(1024))
    munge_socket = d / "munge.socket"
    node = socket.gethostname().split(".")[0]  # what slurmd takes as its node name
    conf = d / "slurm.conf"
    conf.write_text(_slurm_conf(d, node, munge_socket))

    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_", "SRUN_", "SALLOC_"))}
    env["SLURM_CONF"] = str(conf)
    daemons = _Daemons(d, env)
    try:
        daemons.start("munged", "--foreground", f"--socket={munge_socket}", f"--key-file={key}",
                      f"--pid-file={d}/munged.pid", f"--seed-file={d}/munged.seed")
        daemons.wait_for("munge socket", munge_socket.exists)
        daemons.start("slurmctld", "-D", "-f", str(conf))
        daemons.start("slurmd", "-D", "-f", str(conf))
        daemons.wait_for("idle node", lambda: _node_state(env) == "idle")
        yield SlurmCluster(env=env, partition=PARTITION, cpus=CPUS, node=node, workdir=d)
    finally:
        if "slurmd" in daemons.procs:
            _cancel_jobs(env)
        daemons.stop()
