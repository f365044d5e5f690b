"""A full disk under the output directory, on a small tmpfs this test mounts and removes (root only):
one line that names the directory and what to do, the figure in MLflow all the same, no partial file."""

import os
import shutil
import subprocess

import pytest

from helpers import TINY
from helpers.cli import rn50
from helpers.store import runs_in

pytestmark = pytest.mark.slow  # real runs
PAGE = 4096  # tmpfs counts space in pages


@pytest.fixture
def tmpfs(tmp_path):
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root and mount(8)")
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:  # a container without the capability
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    yield disk
    subprocess.run(["umount", str(disk)], check=True)


def leave_free(disk, free_bytes):
    """Fill the tmpfs until `free_bytes` are left."""
    stat = os.statvfs(disk)
    (disk / "filler").write_bytes(b"\0" * (stat.f_bavail * stat.f_frsize - free_bytes))


def test_an_output_directory_on_a_full_disk_is_one_line(tmpfs, tmp_path):
    leave_free(tmpfs, 0)
    proc = rn50(tmp_path, *TINY, f"hydra.run.dir={tmpfs}/run")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"rn50: error: cannot write {tmpfs}/run: No space left on device; free space there or set "
        "hydra.run.dir=/a/writable/path"]
    assert not runs_in(tmp_path) and list(tmpfs.iterdir()) == [tmpfs / "filler"]  # nothing of the run left


def test_a_disk_that_fills_as_the_results_are_written_loses_no_figure(tmpfs, tmp_path):
    # What a run writes before its results: Hydra's files, the lock, its log and its resolved config. A dry
    # run writes all but the last; the disk is left with room for those and one page more.
    dry = rn50(tmp_path, *TINY, "dry_run=true", f"hydra.run.dir={tmpfs}/dry")
    assert dry.returncode == 0, dry.stderr
    before = sum(-(-f.stat().st_size // PAGE) for f in (tmpfs / "dry").rglob("*") if f.is_file())
    shutil.rmtree(tmpfs / "dry")
    leave_free(tmpfs, (before + 2) * PAGE)  # the log grows, and resolved_config.yaml takes one
    proc = rn50(tmp_path, *TINY, f"hydra.run.dir={tmpfs}/run")
    assert proc.returncode == 0, proc.stderr[-2000:]
    warnings = [line for line in proc.stderr.splitlines() if "no space left" in line]
    assert len(warnings) == 1 and f"no space left on device in {tmpfs}/run: the run's files there" in warnings[0]
    assert "hydra.run.dir=/a/path/with/space" in warnings[0] and "Traceback" not in proc.stderr
    (run,) = runs_in(tmp_path)
    assert run.info.status == "FINISHED" and run.data.metrics["throughput/images_per_sec"] > 0
    assert run.data.tags["output_dir_error"] == f"no space left on device in {tmpfs}/run"
    left = {f.name for f in (tmpfs / "run").iterdir()}
    assert not left & {"result.json", "result.partial", "summary.json", "step_times.csv", "ranks.csv"}, left
