"""Every way a launcher ends ends its run and its ranks; a rank that is killed is one line.

Real signals to real processes, found through /proc: a launcher's ranks are the processes
whose working directory is the test's own.
"""

import csv
import fcntl
import os
import pty
import select
import shlex
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from helpers import ROOT, TINY
from helpers.store import empty_store_in, runs_in

pytestmark = pytest.mark.slow  # each runs python -m rn50 and signals it

# A run that measures until it is stopped.
ENDLESS = [a for a in TINY if not a.startswith("bench.steps")] + ["bench.steps=1000000"]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def alive(pid: int) -> bool:
    """Running, not a zombie left for a parent (or an init that never reaps) to collect."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in "ZX"
    except (OSError, IndexError):
        return False


def processes_in(cwd: Path) -> dict:
    """{pid: command line} of the live processes working in cwd: a launcher, its shell, its ranks."""
    found = {}
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and Path(os.readlink(entry / "cwd")) == cwd and alive(int(entry.name)):
                found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:  # gone meanwhile, or not ours to look at
            pass
    return found


def ranks_in(cwd: Path) -> list:
    return [pid for pid, command in processes_in(cwd).items() if "rn50.rank" in command]


def wait_for(condition, what: str, timeout_s: float = None, terminal=None) -> None:
    """Poll until condition() holds; a terminal's output is read meanwhile, so it never fills.
    timeout_s: only for a bound the issue sets (an orphaned rank ends within seconds); a busy machine
    may take any time to start a run."""
    deadline = time.monotonic() + timeout_s if timeout_s is not None else float("inf")
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} after {timeout_s} s")
        if terminal is not None and select.select([terminal.fd], [], [], 0.5)[0]:
            terminal.seen += os.read(terminal.fd, 65536).decode(errors="replace")
        else:
            time.sleep(0.5)


class Terminal:
    """A pseudo-terminal with an interactive bash in it, as a terminal window holds one."""

    def __init__(self, cwd: Path):
        self.fd, tty = pty.openpty()
        self.seen = ""
        self.shell = subprocess.Popen(
            ["bash", "--norc", "--noprofile", "-i"], cwd=cwd, env=ENV, stdin=tty, stdout=tty, stderr=tty,
            start_new_session=True, preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
        os.close(tty)

    def type(self, line: str) -> None:
        os.write(self.fd, (line + "\n").encode())

    def close(self) -> None:
        """The window closes: the kernel hangs up the terminal, and bash hangs up its jobs."""
        os.close(self.fd)
        self.shell.wait()


@pytest.mark.parametrize("how", ["kill -HUP", "terminal closed"])
def test_a_hang_up_marks_the_run_killed_and_leaves_no_rank(tmp_path, how):
    empty_store_in(tmp_path)
    command = [sys.executable, "-m", "rn50", *ENDLESS]
    if how == "kill -HUP":
        with open(tmp_path / "stderr", "w") as err:
            launcher = subprocess.Popen(command, cwd=tmp_path, env=ENV, stdout=subprocess.DEVNULL, stderr=err)
        wait_for(lambda: "rn50: measuring" in (tmp_path / "stderr").read_text(), "measuring rank")
        launcher.send_signal(signal.SIGHUP)
        assert launcher.wait() == 128 + signal.SIGHUP
        (run,) = runs_in(tmp_path)
        last = (tmp_path / "stderr").read_text().splitlines()[-1]
        assert last == f"rn50: interrupted by SIGHUP: run {run.info.run_id} marked KILLED"
    else:
        terminal = Terminal(tmp_path)
        terminal.type(shlex.join(command))
        wait_for(lambda: "rn50: measuring" in terminal.seen, "measuring rank", terminal=terminal)
        terminal.close()
    wait_for(lambda: not processes_in(tmp_path), "end of every process")  # launcher, ranks and shell
    (run,) = runs_in(tmp_path)
    assert run.info.status == "KILLED"
    assert run.data.tags["failure"] == "interrupted" and run.data.tags["error"] == "interrupted by SIGHUP"


def measuring(tmp_path):
    """An endless run's launcher once its rank measures, and that rank's pid."""
    empty_store_in(tmp_path)
    with open(tmp_path / "stderr", "w") as err:
        launcher = subprocess.Popen([sys.executable, "-m", "rn50", *ENDLESS], cwd=tmp_path, env=ENV,
                                    stdout=subprocess.DEVNULL, stderr=err)
    wait_for(lambda: "rn50: measuring" in (tmp_path / "stderr").read_text(), "measuring rank")
    (rank,) = ranks_in(tmp_path)
    return launcher, rank


def test_no_rank_outlives_a_launcher_killed_outright(tmp_path):
    launcher, rank = measuring(tmp_path)
    launcher.kill()  # SIGKILL: nothing of the launcher runs, so its rank must notice by itself
    launcher.wait()
    wait_for(lambda: not alive(rank), "end of the orphaned rank", timeout_s=60)  # the issue: within seconds
    # ... and close the run its launcher left RUNNING
    (run,) = runs_in(tmp_path)
    assert run.info.status == "KILLED" and run.data.tags["failure"] == "launcher_lost"
    assert run.data.tags["error"] == f"its launcher (pid {launcher.pid} on {os.uname().nodename}) ended without closing it"


def test_the_next_command_closes_a_run_whose_launcher_and_ranks_were_killed(tmp_path):
    launcher, rank = measuring(tmp_path)
    os.kill(rank, signal.SIGKILL)  # the rank first, so that nothing is left to close the run
    launcher.kill()
    launcher.wait()
    wait_for(lambda: not alive(rank), "end of the rank")
    (left,) = runs_in(tmp_path)
    assert left.info.status == "RUNNING"
    proc = subprocess.run([sys.executable, "-m", "rn50", *TINY], cwd=tmp_path, env=ENV, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    runs = {r.info.run_id: r for r in runs_in(tmp_path)}
    assert runs[left.info.run_id].info.status == "KILLED"
    assert runs[left.info.run_id].data.tags["failure"] == "launcher_lost"


def test_a_killed_rank_is_one_line_and_its_signal_is_in_the_sweep_report(tmp_path):
    # Two endless points whose rank is killed (SIGKILL, as the kernel's OOM killer does; SIGTERM,
    # which a rank obeys at once), and a point that finishes.
    empty_store_in(tmp_path)
    args = [a for a in ENDLESS if not a.startswith("bench.steps")]
    with open(tmp_path / "stderr", "w") as err:
        sweep = subprocess.Popen([sys.executable, "-m", "rn50", "--multirun", *args,
                                  "bench.steps=1000000,1000001,2"], cwd=tmp_path, env=ENV,
                                 stdout=subprocess.DEVNULL, stderr=err)
    for steps, signum in (("1000000", signal.SIGKILL), ("1000001", signal.SIGTERM)):
        wait_for(lambda: f"rn50: measuring 0/{steps} steps" in (tmp_path / "stderr").read_text(), "measuring rank")
        (rank,) = ranks_in(tmp_path)
        os.kill(rank, signum)
    assert sweep.wait() == 1
    stderr = (tmp_path / "stderr").read_text()
    assert "Traceback" not in stderr
    errors = [line for line in stderr.splitlines() if line.startswith("rn50: error:")]
    assert len(errors) == 3, stderr[-3000:]
    assert errors[0].startswith("rn50: error: rank 0 failed: killed by SIGKILL (the kernel's out-of-memory killer?)")
    assert errors[1].startswith("rn50: error: rank 0 failed: killed by SIGTERM")
    assert errors[2].startswith("rn50: error: 2 of 3 sweep points failed:")
    assert "(killed by SIGKILL)" in errors[2] and "(killed by SIGTERM)" in errors[2]
    parent = next(r for r in runs_in(tmp_path) if r.data.tags.get("rn50.role") == "sweep")
    rows = list(csv.DictReader(open(Path(parent.data.tags["sweep.dir"]) / "sweep_report.csv")))
    assert sorted(r["status"] for r in rows) == ["FAILED (killed by SIGKILL)", "FAILED (killed by SIGTERM)",
                                                 "FINISHED"]
    assert not processes_in(tmp_path)
