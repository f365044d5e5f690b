"""Real-data runs of python -m rn50 on the CPU: imagefolder and DALI's host path, a bad tree and a
corrupt JPEG refused or named in one line."""

import csv
from pathlib import Path

import pytest

from helpers.cli import rn50
from helpers.images import REAL, make_tree
from helpers.store import runs_in


@pytest.mark.slow
@pytest.mark.parametrize("pipeline", ["imagefolder", "dali"])
def test_tiny_real_data_run(tmp_path, image_tree, pipeline):
    if pipeline == "dali":
        pytest.importorskip("nvidia.dali")
    proc = rn50(tmp_path, *REAL, f"data={pipeline}", f"data.root={image_tree}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = runs_in(tmp_path)
    assert run.info.status == "FINISHED"
    assert run.data.metrics["throughput/images_per_sec"] > 0
    assert 0 <= run.data.metrics["data/wait_pct"] <= 100
    assert run.data.params["data.name"] == pipeline


@pytest.mark.parametrize("overrides,expected", [
    (["data.root=/nonexistent/imagenet"], "does not exist"),
    (["data.batch_size=64"], "fewer than one global batch"),
])
@pytest.mark.slow
def test_bad_tree_is_one_line_and_no_run(tmp_path, image_tree, overrides, expected):
    proc = rn50(tmp_path, *REAL, "data=imagefolder", f"data.root={image_tree}", *overrides)
    assert proc.returncode == 2
    errors = [l for l in proc.stderr.splitlines() if "error" in l.lower()]
    assert len(errors) == 1 and expected in errors[0]
    assert not runs_in(tmp_path)


# imagefolder's corrupt-file path is checked in tests/e2e/test_sweep.py's failure sweep.
@pytest.mark.slow
@pytest.mark.parametrize("pipeline", ["dali"])
def test_corrupt_jpeg_is_named(tmp_path, pipeline):
    pytest.importorskip("nvidia.dali")
    root = make_tree(tmp_path / "imagenet", classes=1, per_class=4)
    bad = next((root / "train" / "n00000000").glob("*.JPEG"))
    bad.write_bytes(bad.read_bytes()[:200])
    proc = rn50(tmp_path, *REAL, f"data={pipeline}", f"data.root={root}")
    assert proc.returncode == 1
    errors = [l for l in proc.stderr.splitlines() if l.startswith("rn50: error:")]
    assert len(errors) == 1 and bad.name in errors[0], proc.stderr[-2000:]
    (run,) = runs_in(tmp_path)
    assert run.info.status == "FAILED" and bad.name in run.data.tags["error"]


@pytest.mark.slow
def test_a_sweep_sets_real_data_against_synthetic(tmp_path, image_tree):
    # The tree's 3 class folders make imagefolder's head 3 classes, synthetic's 1000: the same settings still.
    proc = rn50(tmp_path, "--multirun", *REAL, "data=synthetic,imagefolder", f"data.root={image_tree}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    parent = next(r for r in runs_in(tmp_path) if r.data.tags.get("sweep.dir"))
    rows = {r["data"]: r for r in csv.DictReader(open(Path(parent.data.tags["sweep.dir"]) / "sweep_report.csv"))}
    ratio = float(rows["imagefolder"]["images_per_sec_median"]) / float(rows["synthetic"]["images_per_sec_median"])
    assert float(rows["imagefolder"]["vs_synthetic"]) == pytest.approx(ratio, rel=1e-3)
    assert rows["synthetic"]["vs_synthetic"] == ""
    assert float(rows["imagefolder"]["cpu_cores_per_device"]) >= 0
