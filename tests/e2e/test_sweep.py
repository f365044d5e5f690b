"""--multirun: one parent run, one child per job, failures recorded, a report at the end."""

import csv
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import ROOT, TINY
from helpers.cli import rn50
from helpers.images import make_tree
from helpers.store import empty_store_in, runs_in
from rn50.tracking.runs import PARENT_TAG

pytestmark = pytest.mark.slow  # every test here runs a real --multirun

TINY_NO_BATCH = [a for a in TINY if not a.startswith("data.batch_size")]


def split(cwd):
    runs = runs_in(cwd)
    parents = [r for r in runs if r.data.tags.get("rn50.role") == "sweep"]
    assert len(parents) == 1, [r.info.run_name for r in runs]
    children = [r for r in runs if r.data.tags.get(PARENT_TAG) == parents[0].info.run_id]
    assert len(children) == len(runs) - 1  # nothing outside the sweep, nothing logged twice
    return parents[0], children


def test_sweep_reports_every_point_and_runs_the_right_processes_once(tmp_path):
    # dist first: Hydra varies the last override fastest, so the points of one world size run
    # one after another in the same warm ranks.
    proc = rn50(tmp_path, "--multirun", *TINY_NO_BATCH, "dist=1n1g,1n2g", "data.batch_size=2,4")
    assert proc.returncode == 0, proc.stderr[-3000:]
    parent, children = split(tmp_path)
    assert parent.info.status == "FINISHED"
    assert "data.batch_size=2,4" in parent.data.tags["sweep.overrides"]
    points_lines = [l for l in proc.stderr.splitlines() if re.match(r"\[\d+/\d+\] ", l)]
    assert [l.split("]")[0] for l in points_lines] == ["[1/4", "[2/4", "[3/4", "[4/4"], proc.stderr[-2000:]
    assert all("images/sec" in l and " cpu: " in l for l in points_lines)  # dist.accelerator=cpu: labelled
    assert parent.data.tags["sweep.start_time"]
    points = sorted((c.data.params["data.batch_size"], c.data.tags["world_size"]) for c in children)
    assert points == [("2", "1"), ("2", "2"), ("4", "1"), ("4", "2")]  # each point once, its own processes
    assert all(c.info.status == "FINISHED" for c in children)

    sweep_dir = Path(parent.data.tags["sweep.dir"])
    rows = list(csv.DictReader(open(sweep_dir / "sweep_report.csv")))
    assert sorted((r["batch_per_gpu"], r["gpus"]) for r in rows) == [("2", "1"), ("2", "2"), ("4", "1"), ("4", "2")]
    for r in rows:
        assert float(r["images_per_sec_median"]) > 0
        if r["gpus"] == "1":
            assert r["speedup"] == "1.0"
            assert r["allreduce_ms"] == r["busbw_GBps"] == r["comm_exposed_ms"] == r["transport"] == ""
        else:
            assert float(r["speedup"]) > 0
            assert float(r["scaling_efficiency_pct"]) == float(r["speedup"]) * 50
            # two gloo ranks timed their gradients' all-reduce after their windows
            assert float(r["allreduce_ms"]) > 0 and float(r["busbw_GBps"]) > 0 and r["transport"] == "gloo"
            assert float(r["comm_exposed_ms"]) >= 0 and 0 <= float(r["comm_hidden_pct"]) <= 100
    report_rows = json.loads((sweep_dir / "sweep_report.json").read_text())
    assert len(report_rows) == 4
    # whether the network changed between the all-reduce before the first step and the one after the windows
    for r in report_rows:  # two ranks timed both; one rank timed neither
        assert r["network_changed"] in ((None,) if r["gpus"] == 1 else (True, False)), r
    table = (sweep_dir / "sweep_report.md").read_text().splitlines()
    assert len(table) == 11 and "images/sec median" in table[0] and table[-1].startswith("sweep wall time")
    assert "| all-reduce ms |" in table[0] and "| transport |" in table[0]
    scaling = [line for line in table if line.startswith("- resnet18")]
    # (a busy 2-core host can move gloo's all-reduce enough that the line names a change: "over gloo (...), ")
    assert len(scaling) == 2 and all(" 2 CPU processes: " in line and " GB/s over gloo" in line for line in scaling)
    for png in ("throughput_vs_batch.png", "speedup_vs_gpus.png"):
        assert (sweep_dir / png).read_bytes()[:4] == b"\x89PNG"

    # Points of one world size run in the same warm processes, one pool per world size.
    pids = {}
    for c in children:
        ranks = list(csv.DictReader(open(Path(c.data.tags["output_dir"]) / "ranks.csv")))
        pids.setdefault(c.data.tags["world_size"], []).append(tuple(r["pid"] for r in ranks))
    assert all(len(set(p)) == 1 for p in pids.values()) and pids["1"][0] != pids["2"][0][:1], pids
    for c in children:
        m = c.data.metrics
        assert m["throughput/images_per_sec"] == pytest.approx(
            int(c.data.params["data.batch_size"]) * int(c.data.tags["world_size"]) * 2 / m["window/seconds_total"],
            rel=1e-5)  # as logged: six significant digits
        assert 0 < m["time/startup_s"] < m["time/wall_s"]
        stages = {k: v for k, v in m.items() if k.startswith("time/startup_") and k != "time/startup_s"}
        assert sum(stages.values()) == pytest.approx(m["time/startup_s"], abs=0.01), stages
    # a world size's first point started its ranks (their process and imports are in its start); the second
    # found them warm
    for world in ("1", "2"):
        points = [c.data.metrics for c in children if c.data.tags["world_size"] == world]
        assert sorted("time/startup_ranks_s" in m for m in points) == [False, True], points

    pair = next(c for c in children if c.data.tags["world_size"] == "2")  # two processes, one run
    m = pair.data.metrics
    assert m["throughput/images_per_sec"] == pytest.approx(2 * m["throughput/images_per_sec_per_device"], rel=1e-5)
    assert m["comm/allreduce_ms"] > 0 and m["comm/gradient_MB"] == pytest.approx(46.76, rel=1e-3)  # resnet18's
    assert m["comm/allreduce_before_ms"] > 0 and pair.data.tags["network_changed"] in ("true", "false")
    assert pair.data.tags["comm_transport"] == "gloo"
    # what the sweep found against its 1-process point, logged into the point for the benchmark view
    assert m["scaling/efficiency_pct"] > 0 and m["comm/exposed_ms_per_step"] >= 0
    steps = list(csv.DictReader(open(Path(pair.data.tags["output_dir"]) / "step_times.csv")))
    assert {s["rank"] for s in steps} == {"0", "1"}

    # The same report again, from the tracking store alone.
    again = rn50(tmp_path, "--parent-run-id", parent.info.run_id, "--out", "again", module="rn50.report")
    assert again.returncode == 0, again.stderr[-2000:]
    assert (tmp_path / "again" / "sweep_report.csv").read_text() == (sweep_dir / "sweep_report.csv").read_text()
    table = (sweep_dir / "sweep_report.md").read_text().split("\nsweep wall time")[0]
    assert (tmp_path / "again" / "sweep_report.md").read_text() == table


def test_failed_points_do_not_stop_the_sweep(tmp_path):
    # Real failures: a batch no allocator holds (oom), a corrupt JPEG (error), and a batch
    # larger than the data set (config, found before the job starts).
    root = make_tree(tmp_path / "imagenet", classes=1, per_class=4)
    bad = next((root / "train" / "n00000000").glob("*.JPEG"))
    bad.write_bytes(bad.read_bytes()[:200])
    proc = rn50(tmp_path, "--multirun", *TINY_NO_BATCH, "data.num_workers=1", f"data.root={root}",
                "data=synthetic,imagefolder", "data.batch_size=2,100000000")
    assert proc.returncode == 1
    assert "rn50: error: 3 of 4 sweep points failed" in proc.stderr
    parent, children = split(tmp_path)
    assert parent.info.status == "FAILED"
    by_point = {(c.data.params["data.name"], c.data.params["data.batch_size"]): c for c in children}
    assert by_point[("synthetic", "2")].info.status == "FINISHED"
    failures = {k: (c.info.status, c.data.tags.get("failure")) for k, c in by_point.items()}
    assert failures[("synthetic", "100000000")] == ("FAILED", "oom")
    assert failures[("imagefolder", "2")] == ("FAILED", "error")
    assert failures[("imagefolder", "100000000")] == ("FAILED", "config")
    corrupt, oom = by_point[("imagefolder", "2")], by_point[("synthetic", "100000000")]
    log = Path(corrupt.data.tags["output_dir"]) / "rank0.log"
    assert re.fullmatch(rf"rank 0 failed: corrupt image {re.escape(str(bad))} \(.+\); remove or replace it; "
                        rf"traceback in {re.escape(str(log))}", corrupt.data.tags["error"]), corrupt.data.tags["error"]
    assert oom.data.tags["error"].startswith("rank 0 failed: oom at data.batch_size=100000000: ")
    # One line per failed point; the tracebacks and Lightning's warnings are in the ranks' logs.
    errors = [l for l in proc.stderr.splitlines() if l.startswith("rn50: error:")]
    assert len(errors) == 4 and errors[:2] == [f"rn50: error: {oom.data.tags['error']}",
                                               f"rn50: error: {corrupt.data.tags['error']}"], proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "Traceback" in log.read_text()

    rows = list(csv.DictReader(open(Path(parent.data.tags["sweep.dir"]) / "sweep_report.csv")))
    assert sorted(r["status"] for r in rows) == ["FAILED (config)", "FAILED (error)", "FAILED (oom)", "FINISHED"]


def test_a_sweep_whose_points_did_not_train_still_ends_with_its_report(tmp_path):
    # Three real points: one diverges (no figure), one's loss rises across its window (a figure, flagged),
    # one trains.
    proc = rn50(tmp_path, "--multirun", *TINY, "optim.lr=1e12,0.5,0.01")
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("rn50: error: 1 of 3 sweep points failed: ")
    parent, children = split(tmp_path)
    assert parent.info.status == "FAILED" and parent.data.tags["sweep.points"] == "3 points: 2 finished, 1 failed"
    assert parent.data.tags["mlflow.note.content"].startswith("**3 points: 2 finished, 1 failed.**")
    sweep_dir = Path(parent.data.tags["sweep.dir"])
    rows = {r["run_id"]: r for r in csv.DictReader(open(sweep_dir / "sweep_report.csv"))}
    by_lr = {c.data.params["optim.lr"]: c.info.run_id for c in children}
    diverged, rose, fell = (rows[by_lr[lr]] for lr in ("1000000000000.0", "0.5", "0.01"))
    assert diverged["status"] == "FAILED (diverged)" and diverged["images_per_sec_median"] == ""
    assert rose["status"] == fell["status"] == "FINISHED"
    assert (rose["loss_fell"], fell["loss_fell"]) == ("no", "yes")  # flagged in its row, not only in its log
    table = (sweep_dir / "sweep_report.md").read_text()
    assert "| loss fell |" in table.splitlines()[0]
    # The same report from MLflow alone.
    again = rn50(tmp_path, "--parent-run-id", parent.info.run_id, "--out", "again", module="rn50.report")
    assert again.returncode == 0, again.stderr[-2000:]
    assert (tmp_path / "again" / "sweep_report.csv").read_text() == (sweep_dir / "sweep_report.csv").read_text()


def test_a_sweeps_points_that_never_started_are_in_its_report(tmp_path):
    # A sweep that stops before its points run (optim.lr is a float: "abc" does not compose, and Hydra
    # composes every job of a batch first): both points are rows, from MLflow alone.
    proc = rn50(tmp_path, "--multirun", *TINY, "optim.lr=0.01,abc")
    assert proc.returncode != 0
    (parent,) = [r for r in runs_in(tmp_path) if r.data.tags.get("rn50.role") == "sweep"]
    again = rn50(tmp_path, "--parent-run-id", parent.info.run_id, "--out", "again", module="rn50.report")
    assert again.returncode == 0, again.stderr[-2000:]
    rows = list(csv.DictReader(open(tmp_path / "again" / "sweep_report.csv")))
    assert [(r["status"], r["model"]) for r in rows] == [("NOT STARTED", "not started: optim.lr=0.01"),
                                                         ("NOT STARTED", "not started: optim.lr=abc")]


def test_on_a_host_without_a_gpu_each_point_runs_the_cpu_profile_with_the_keys_given(tmp_path):
    """device=auto composes each job again as device=cpu; the swept and given keys win over the
    profile's, and each point's line and report row say CPU."""
    given = [a for a in TINY_NO_BATCH if not a.startswith("dist.accelerator")]
    proc = rn50(tmp_path, "--multirun", *given, "data.batch_size=2,4", env={"CUDA_VISIBLE_DEVICES": ""})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "falls back" not in proc.stderr  # only the profile's own line, once a point
    points = [line.split(": ")[0] for line in proc.stderr.splitlines() if re.match(r"\[\d+/\d+\] ", line)]
    assert points == ["[1/2] resnet18 fp32 1n1g bs2 cpu", "[2/2] resnet18 fp32 1n1g bs4 cpu"], proc.stderr[-2000:]
    parent, children = split(tmp_path)
    assert sorted(c.info.run_name for c in children) == ["resnet18-fp32-1n1g-bs2-cpu", "resnet18-fp32-1n1g-bs4-cpu"]
    assert all(c.data.params["device"] == "cpu" and c.data.params["bench.steps"] == "2" for c in children)
    rows = list(csv.DictReader(open(Path(parent.data.tags["sweep.dir"]) / "sweep_report.csv")))
    assert [r["model"] for r in rows] == ["resnet18 on CPU", "resnet18 on CPU"]


def test_a_sweep_stopped_early_closes_its_parent(tmp_path):
    # A point that does not compose (optim.lr is a float) stops the sweep before its jobs run.
    proc = rn50(tmp_path, "--multirun", *TINY_NO_BATCH, "optim.lr=abc,0.1")
    assert proc.returncode != 0
    assert [l for l in proc.stderr.splitlines() if l.startswith("rn50: error:")]
    (parent,) = runs_in(tmp_path)
    assert parent.info.status == "FAILED"


def test_report_errors_are_one_line(tmp_path):
    proc = rn50(tmp_path, "--parent-run-id", "nosuch", module="rn50.report")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == ["rn50.report: error: --tracking-uri sqlite:///mlflow.db: "
                                                "no such file; run where the runs were recorded"]
    assert not (tmp_path / "mlflow.db").exists()
    empty_store_in(tmp_path, "m.db")
    proc = rn50(tmp_path, "--parent-run-id", "nosuch", "--tracking-uri", f"sqlite:///{tmp_path}/m.db",
                module="rn50.report")
    errors = [l for l in proc.stderr.splitlines() if "error" in l.lower()]
    assert proc.returncode == 2 and len(errors) == 1
    assert errors[0].startswith("rn50.report: error: --parent-run-id nosuch")
    # sqlite options after the file name (MLflow passes them on to SQLAlchemy) are no part of the file's name
    proc = rn50(tmp_path, "--parent-run-id", "nosuch", "--tracking-uri", f"sqlite:///{tmp_path}/m.db?timeout=30",
                module="rn50.report")
    errors = [l for l in proc.stderr.splitlines() if "error" in l.lower()]
    assert proc.returncode == 2 and len(errors) == 1, proc.stderr[-2000:]
    assert errors[0].startswith("rn50.report: error: --parent-run-id nosuch")


def test_a_stopped_sweep_resumes_without_rerunning_finished_points(tmp_path):
    empty_store_in(tmp_path)
    args = ["--multirun", *TINY_NO_BATCH, "precision=fp32", "data.batch_size=2,3,4"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "rn50", *args], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while proc.poll() is None and not any(r.info.status == "FINISHED" and r.data.tags.get(PARENT_TAG)
                                             for r in runs_in(tmp_path)):
        time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)  # a real signal, as a scheduler or a user would send it
    _, err = proc.communicate()
    assert proc.returncode == 128 + signal.SIGTERM, err[-2000:]
    (last,) = [l for l in err.splitlines() if l.startswith("rn50: interrupted by SIGTERM")] or [err[-2000:]]
    parent, children = split(tmp_path)
    assert parent.info.status == "KILLED"
    finished = [c for c in children if c.info.status == "FINISHED"]
    assert len(finished) == 1
    # The line names the two commands a user wants next; the report one, as given, reports the finished point.
    assert f"sweep {parent.info.run_id} marked KILLED: the same command with sweep.resume=true" in last
    report = shlex.split(last.split("`")[1])
    assert report[:3] == ["python", "-m", "rn50.report"]
    made = rn50(tmp_path, *report[3:], "--out", "stopped", module="rn50.report")
    assert made.returncode == 0, made.stderr[-2000:]
    rows = list(csv.DictReader(open(tmp_path / "stopped" / "sweep_report.csv")))
    assert len(rows) == 3  # every point of the sweep: the finished one, the one stopped, those never started
    assert [r["batch_per_gpu"] for r in rows if r["status"] == "FINISHED"] == [finished[0].data.params["data.batch_size"]]
    assert {r["status"] for r in rows} - {"FINISHED"} <= {"KILLED (interrupted)", "NOT STARTED"}

    again = rn50(tmp_path, *args, "sweep.resume=true")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "not run again" in again.stderr
    parent_after, children = split(tmp_path)
    assert parent_after.info.run_id == parent.info.run_id and parent_after.info.status == "FINISHED"
    by_batch = {}
    for c in children:
        by_batch.setdefault(c.data.params["data.batch_size"], []).append(c)
    done = finished[0].data.params["data.batch_size"]
    assert len(by_batch[done]) == 1  # the finished point ran once
    assert all(any(c.info.status == "FINISHED" for c in runs) for runs in by_batch.values())
    assert parent_after.data.tags["sweep.dir"] != parent.data.tags["sweep.dir"]  # the latest report's home
    rows = list(csv.DictReader(open(Path(parent_after.data.tags["sweep.dir"]) / "sweep_report.csv")))
    assert sorted(r["batch_per_gpu"] for r in rows) == ["2", "3", "4"]

    # By id, with other overrides: the matching point is resumed, the other joins as a new point.
    parent_id = parent.info.run_id
    other = rn50(tmp_path, *args[:-1], "data.batch_size=2,5", f"sweep.resume={parent_id}")
    assert other.returncode == 0, other.stderr[-3000:]
    assert "its points that match are resumed, the others join it as new points" in other.stderr
    assert "bs2-cpu: finished before" in other.stderr and "bs5-cpu: a new point of this sweep" in other.stderr
    # A sweep of another experiment is refused, and nothing runs.
    wrong = rn50(tmp_path, *args, "mlflow.experiment_name=elsewhere", f"sweep.resume={parent_id}")
    errors = [l for l in wrong.stderr.splitlines() if l.startswith("rn50: error:")]
    assert wrong.returncode != 0 and len(errors) == 1 and "is a run of experiment rn50, not elsewhere" in errors[0]


def test_resume_errors_name_what_would_work(tmp_path):
    proc = rn50(tmp_path, "--multirun", *TINY_NO_BATCH, "data.batch_size=2,4", "sweep.resume=true")
    errors = [l for l in proc.stderr.splitlines() if l.startswith("rn50: error:")]
    assert proc.returncode != 0 and len(errors) == 1 and "no sweep of experiment rn50" in errors[0]
    proc = rn50(tmp_path, "--multirun", *TINY_NO_BATCH, "data.batch_size=2,4", "sweep.resume=nosuchrun")
    errors = [l for l in proc.stderr.splitlines() if l.startswith("rn50: error:")]
    assert proc.returncode != 0 and len(errors) == 1 and "sweep.resume=nosuchrun: no such run" in errors[0]
    assert not [r for r in runs_in(tmp_path) if r.data.tags.get(PARENT_TAG)]
