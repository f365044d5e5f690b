"""--multirun: one parent run, one child per job, failures recorded, a report at the end."""

import csv
import json
from pathlib import Path

from conftest import TINY, rn50, runs_in
from rn50.tracking import PARENT_TAG

TINY_NO_BATCH = [a for a in TINY if not a.startswith("data.batch_size")]


def split(cwd):
    runs = runs_in(cwd)
    parents = [r for r in runs if r.data.tags.get("rn50.role") == "sweep"]
    assert len(parents) == 1, [r.info.run_name for r in runs]
    children = [r for r in runs if r.data.tags.get(PARENT_TAG) == parents[0].info.run_id]
    assert len(children) == len(runs) - 1  # nothing outside the sweep, nothing logged twice
    return parents[0], children


def test_batch_sweep_reports_every_point(tmp_path):
    proc = rn50(tmp_path, "--multirun", *TINY_NO_BATCH, "data.batch_size=2,4")
    assert proc.returncode == 0, proc.stderr[-3000:]
    parent, children = split(tmp_path)
    assert parent.info.status == "FINISHED"
    assert "data.batch_size=2,4" in parent.data.tags["sweep.overrides"]
    assert parent.data.tags["sweep.start_time"]
    assert sorted(c.data.params["data.batch_size"] for c in children) == ["2", "4"]
    assert all(c.info.status == "FINISHED" for c in children)

    sweep_dir = Path(parent.data.tags["sweep.dir"])
    rows = list(csv.DictReader(open(sweep_dir / "sweep_report.csv")))
    assert [r["batch_per_gpu"] for r in rows] == ["2", "4"]
    assert all(float(r["images_per_sec_median"]) > 0 and r["speedup"] == "1.0" for r in rows)
    assert len(json.loads((sweep_dir / "sweep_report.json").read_text())) == 2
    table = (sweep_dir / "sweep_report.md").read_text().splitlines()
    assert len(table) == 4 and "images/sec median" in table[0]
    for png in ("throughput_vs_batch.png", "speedup_vs_gpus.png"):
        assert (sweep_dir / png).read_bytes()[:4] == b"\x89PNG"

    # The same report again, from the tracking store alone.
    again = rn50(tmp_path, "--parent-run-id", parent.info.run_id, "--out", "again", module="rn50.report")
    assert again.returncode == 0, again.stderr[-2000:]
    assert (tmp_path / "again" / "sweep_report.csv").read_text() == (sweep_dir / "sweep_report.csv").read_text()
    assert (tmp_path / "again" / "sweep_report.md").read_text() == (sweep_dir / "sweep_report.md").read_text()


def test_dist_sweep_runs_the_right_processes_once(tmp_path):
    proc = rn50(tmp_path, "--multirun", *TINY, "dist=1n1g,1n2g")
    assert proc.returncode == 0, proc.stderr[-3000:]
    _, children = split(tmp_path)
    assert sorted(c.data.tags["world_size"] for c in children) == ["1", "2"]
    report = Path(children[0].data.tags["output_dir"]).parent / "sweep_report.csv"
    rows = {r["gpus"]: r for r in csv.DictReader(open(report))}
    assert set(rows) == {"1", "2"} and float(rows["2"]["speedup"]) > 0
    assert float(rows["2"]["scaling_efficiency_pct"]) == float(rows["2"]["speedup"]) * 50


def test_failed_points_do_not_stop_the_sweep(tmp_path):
    # A batch no allocator can hold (a real out-of-memory) and an invalid learning rate.
    proc = rn50(tmp_path, "--multirun", *TINY_NO_BATCH, "data.batch_size=2,100000000", "optim.lr=0.1,-1")
    assert proc.returncode == 1
    assert "rn50: error: 3 of 4 sweep points failed" in proc.stderr
    parent, children = split(tmp_path)
    assert parent.info.status == "FAILED"
    by_point = {(c.data.params["data.batch_size"], c.data.params["optim.lr"]): c for c in children}
    assert by_point[("2", "0.1")].info.status == "FINISHED"
    oom = by_point[("100000000", "0.1")]
    assert oom.info.status == "FAILED" and oom.data.tags["failure"] == "oom"
    other = by_point[("2", "-1.0")]
    assert other.info.status == "FAILED" and other.data.tags["failure"] == "error"
    assert "Invalid learning rate" in other.data.tags["error"]
    rows = list(csv.DictReader(open(Path(parent.data.tags["sweep.dir"]) / "sweep_report.csv")))
    assert sorted(r["status"] for r in rows) == ["FAILED (error)", "FAILED (error)", "FAILED (oom)", "FINISHED"]
