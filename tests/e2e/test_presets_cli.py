"""Presets seen from the command line: --cfg job shows what a preset sets, and a capture that cannot
work on the CPU is one line and no run."""

import pytest
import yaml

from helpers import TINY
from helpers.cli import rn50
from helpers.store import runs_in


@pytest.mark.slow
def test_cfg_job_shows_what_a_preset_sets(tmp_path):
    proc = rn50(tmp_path, "experiment=fastest", "--cfg", "job")
    assert proc.returncode == 0, proc.stderr[-2000:]
    job = yaml.safe_load(proc.stdout)
    assert job["data"]["batch_size"] == 512 and job["precision"]["name"] == "amp"
    assert job["model"]["compile"] is True and job["model"]["cuda_graphs"] is True


@pytest.mark.slow
def test_cuda_graphs_on_the_cpu_is_one_line_and_no_run(tmp_path):
    proc = rn50(tmp_path, *TINY, "model.compile=true", "model.cuda_graphs=true")
    assert proc.returncode == 2
    errors = [line for line in proc.stderr.splitlines() if "error" in line.lower()]
    assert errors == ["rn50: error: model.cuda_graphs=true captures CUDA graphs, which need a GPU, "
                      "but this run is on the CPU; use model.cuda_graphs=false"], proc.stderr[-2000:]
    assert not runs_in(tmp_path)
