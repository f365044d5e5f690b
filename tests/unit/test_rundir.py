"""A run's own directory (rn50/launcher/rundir.py) and a process found again (rn50/measure/host.py), without other
processes: those are in tests/e2e/test_run_directory.py."""

import errno
import fcntl
import os

import pytest

from rn50.measure import host
from rn50.errors import ConfigError
from rn50.launcher import rundir


def test_a_file_system_without_flock_still_runs(tmp_path, monkeypatch):
    def no_flock(fd, op):
        raise OSError(errno.ENOLCK, "No locks available")  # NFS mounted nolock, Lustre without flock

    monkeypatch.setattr(fcntl, "flock", no_flock)
    assert rundir.take(tmp_path / "run") is None
    (tmp_path / "run" / "result.json").write_text("{}")
    assert rundir.take(tmp_path / "run") == "it holds the results of an earlier run (result.json)"


def test_a_finished_sweeps_directory_is_not_run_into_again(tmp_path):
    (tmp_path / "sweep").mkdir()
    (tmp_path / "sweep" / "multirun.yaml").write_text("hydra: {}")
    with pytest.raises(ConfigError, match=r"is another run's: it holds the results of an earlier sweep \(multirun\.yaml\)"):
        rundir.own(tmp_path / "sweep", "hydra.sweep.dir", given=True)
    assert rundir.own(tmp_path / "sweep", "hydra.sweep.dir", given=True, resuming=True) == tmp_path / "sweep"


def test_only_what_this_process_took_and_wrote_is_discarded(tmp_path):
    mine = tmp_path / "outputs" / "2026-11-27" / "10-00-00"
    assert rundir.take(mine) is None
    (mine / ".hydra").mkdir()
    (mine / "__main__.log").write_text("")
    rundir.discard_unused(mine, given=False)
    assert not (tmp_path / "outputs").exists()  # the run's folders, made for it, went with it
    users = tmp_path / "mine"
    users.mkdir()  # the user's own, made before the run
    assert rundir.take(users) is None
    rundir.discard_unused(users, given=True)
    assert users.is_dir() and not any(users.iterdir())
    other = tmp_path / "other"  # a directory another process took: left alone
    other.mkdir()
    (other / ".hydra").mkdir()
    rundir.discard_unused(other, given=True)
    assert (other / ".hydra").is_dir()


@pytest.mark.parametrize("env", [{"RANK": "0"}, {"RANK": "1"}, {"TORCHELASTIC_RUN_ID": "x"}, {"SLURM_STEP_ID": "0"}])
def test_ranks_of_torchrun_and_srun_share_the_directory_their_starter_named(monkeypatch, env):
    for name in ("RANK", "TORCHELASTIC_RUN_ID", "SLURM_STEP_ID"):
        monkeypatch.delenv(name, raising=False)
    assert not rundir.is_rank()
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert rundir.is_rank()


def test_a_process_is_found_again_only_where_this_host_can_tell():
    me = host.this_process()
    assert host.owner_alive(me) is True
    assert host.owner_alive({**me, "pid": "999999999"}) is False
    assert host.owner_alive({**me, "started": "1"}) is False  # its pid, given to a process that started later
    assert host.owner_alive({**me, "boot": "another boot"}) is False  # the host booted since
    assert host.owner_alive({**me, "pidns": "4026531836" if me["pidns"] != "4026531836" else "1"}) is None  # a container
    assert host.owner_alive({**me, "host": "elsewhere"}) is None
    assert host.owner_alive({k: v for k, v in me.items() if k != "pidns"}) is None  # logged without one
    assert host.describe_owner(me) == f"pid {os.getpid()} on {me['host']}"
