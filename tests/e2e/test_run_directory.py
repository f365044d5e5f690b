"""One run, one directory (rn50/launcher/rundir.py): runs started together never share one, a taken
directory the user gave is refused in one line, and a refused config leaves none behind."""

import json
import subprocess
import sys
import textwrap
import time

import pytest

from helpers import ROOT, TINY
from helpers.cli import rn50
from helpers.store import runs_in
from rn50.errors import ConfigError
from rn50.launcher import rundir

pytestmark = pytest.mark.slow  # real processes


@pytest.fixture
def holder(tmp_path):
    """Another process that takes tmp_path/taken and holds it until the test ends, as a running launcher does."""
    taken = tmp_path / "taken"
    code = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from rn50.launcher import rundir
        assert rundir.take(Path({str(taken)!r})) is None
        print("held", flush=True)
        time.sleep(600)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    yield taken, proc.pid
    proc.kill()
    proc.wait()


def test_a_directory_another_launcher_holds_is_not_written_to(holder, capsys):
    taken, pid = holder
    # Hydra's default directory (outputs/DATE/TIME, the same for runs started in the same second): the next one
    chosen = rundir.own(taken, "hydra.run.dir", given=False)
    assert chosen == taken.with_name("taken-2")
    assert capsys.readouterr().err.strip() == (f"rn50: {taken} is another run's (pid {pid} on "
                                               f"{json.loads((taken / rundir.LOCK).read_text())['host']} uses it): "
                                               f"this one's results go to {chosen}")
    # One the user gave: refused, naming the key
    with pytest.raises(ConfigError, match=rf"^hydra\.run\.dir={taken} is another run's: pid {pid} on .* uses it; "
                                          r"give each run its own directory$"):
        rundir.own(taken, "hydra.run.dir", given=True)


def test_a_directory_is_free_again_once_its_launcher_is_gone(holder, tmp_path):
    taken, pid = holder
    subprocess.run(["kill", "-9", str(pid)], check=True)
    for _ in range(100):  # the kernel lets go of a dead process's lock
        if rundir.take(taken) is None:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the dead launcher's directory stayed taken")
    (tmp_path / "done").mkdir()
    (tmp_path / "done" / "result.json").write_text("{}")  # a run that ended there: its results stay its own
    assert rundir.take(tmp_path / "done") == "it holds the results of an earlier run (result.json)"
    assert rundir.take(tmp_path / "done", resuming=True) is None  # train.resume=true goes on in it


def test_runs_given_the_same_directory_together_run_one_at_a_time(tmp_path):
    env = {"PYTHONPATH": str(ROOT)}
    import os
    procs = [subprocess.Popen([sys.executable, "-m", "rn50", *TINY, f"hydra.run.dir={tmp_path}/same"],
                              cwd=tmp_path, env={**os.environ, **env}, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outs = [(p.wait(), p.stderr.read()) for p in procs]
    ran = [err for code, err in outs if code == 0]
    refused = [err for code, err in outs if code != 0]
    assert len(ran) == 1 and len(refused) == 2, outs
    for err in refused:
        (line,) = [l for l in err.splitlines() if "error" in l.lower()]
        assert line.startswith(f"rn50: error: hydra.run.dir={tmp_path}/same is another run's: "), line
        assert line.endswith("; give each run its own directory")
    (run,) = runs_in(tmp_path)  # one run, whose results are the ones kept
    assert json.loads((tmp_path / "same" / "summary.json").read_text())["run_id"] == run.info.run_id


def test_a_refused_config_leaves_no_directory_and_no_run(tmp_path):
    proc = rn50(tmp_path, *TINY, "data.batch_size=0")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == ["rn50: error: data.batch_size=0 is out of range: use a batch size "
                                                "of 1 or more per device"]
    assert not (tmp_path / "outputs").exists() and not runs_in(tmp_path)
