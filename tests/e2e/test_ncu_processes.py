"""profiler=ncu's processes: the collection step that runs ncu (a stand-in executable) and a missing
ncu refused in one line before any run."""

import pytest

from helpers import TINY
from helpers.cli import rn50
from helpers.ncu_data import FINE, NO_PERMISSION, RAW
from helpers.store import runs_in
from rn50.profiling import ncu
from rn50.errors import RunFailed


def test_collect_exports_the_report_and_fails_on_ncus_errors(compose_cfg, tmp_path):
    # A stand-in for ncu that answers `--import` with the real CSV and records its arguments.
    fake = tmp_path / "ncu"
    fake.write_text(f'#!/bin/sh\necho "$@" > {tmp_path}/args\ncat {RAW}\n')
    fake.chmod(0o755)
    cfg = compose_cfg(["profiler=ncu", f"profiler.executable={fake}"])
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(RunFailed, match="wrote no report"):
        ncu.collect(cfg, out)
    (out / ncu.REPORT).write_bytes(b"")
    (out / ncu.LOG).write_text(FINE)
    metrics, files = ncu.collect(cfg, out)
    assert metrics["ncu/kernels"] == 6 and metrics["ncu/tensor_pipe_pct"] == pytest.approx(3999974.4 / 140000)
    assert files[0] == str(out / ncu.CSV) and (out / ncu.CSV).read_text() == RAW.read_text()
    args = (tmp_path / "args").read_text().split()
    assert args[:2] == ["--import", str(out / ncu.REPORT)] and "raw" in args and "base" in args
    (out / ncu.LOG).write_text(NO_PERMISSION)
    with pytest.raises(RunFailed, match="ERR_NVGPUCTRPERM") as info:
        ncu.collect(cfg, out)
    assert info.value.kind == "profiler"


def test_missing_ncu_is_one_line_and_no_run(tmp_path):
    # A host with neither ncu nor a GPU (this one): the first line names what installing ncu would not fix.
    proc = rn50(tmp_path, *TINY, "profiler=ncu", "profiler.executable=/nonexistent/ncu")
    assert proc.returncode == 2
    errors = [line for line in proc.stderr.splitlines() if "error" in line.lower()]
    assert errors == ["rn50: error: dist.accelerator=cpu: profiler=ncu profiles GPU kernels and needs a GPU; use "
                      "dist.accelerator=gpu on a host with one"], proc.stderr
    assert not runs_in(tmp_path)
