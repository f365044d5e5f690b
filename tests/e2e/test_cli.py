"""`python -m rn50` end to end on the CPU, as a user runs it, checked through MLflow."""

import csv
import json
from pathlib import Path

import pytest
import torch

from helpers import TINY
from helpers.cli import rn50
from helpers.store import runs_in
from rn50.measure.timing import STARTUP_STAGES
from rn50.tracking.client import MlflowClient

pytestmark = pytest.mark.slow  # every test here runs `python -m rn50` as a user would


def only_run(cwd):
    runs = runs_in(cwd)
    assert len(runs) == 1, [r.info.run_name for r in runs]
    return runs[0]


def test_tiny_run_is_recorded_with_the_proof_that_it_trained(tmp_path):
    # optim.lr=0.01 and a second warm-up step: the loss falls across the 3 measured steps (issue 27).
    proc = rn50(tmp_path, *TINY, "optim.lr=0.01", "bench.warmup_steps=2", "bench.steps=3", fresh_store=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = only_run(tmp_path)
    assert run.info.status == "FINISHED"
    m, p, t = run.data.metrics, run.data.params, run.data.tags
    # 4 images x 3 measured steps over the window's logged seconds
    assert m["throughput/images_per_sec"] == pytest.approx(4 * 3 / m["window/seconds_total"], rel=1e-5)  # as logged: 6 digits
    assert m["throughput/images_per_sec_per_device"] == m["throughput/images_per_sec"]
    # from the command to the first warm-up step, within the run's wall time
    assert 0 < m["time/startup_s"] < m["time/wall_s"] and m["time/warmup_s"] > 0
    # ...stage by stage: the pool's rank started with the run, so it marked every stage, and they add up
    stages = {k: v for k, v in m.items() if k.startswith("time/startup_") and k != "time/startup_s"}
    assert set(stages) == {f"time/startup_{s}_s" for s in STARTUP_STAGES}, stages
    assert sum(stages.values()) == pytest.approx(m["time/startup_s"], abs=0.01)
    assert 0 < m["cpu/utilization_pct"] <= 100  # a CPU run has a utilization too
    # the run's own CPU and the host's over the windows (/proc): recorded; their sizes, in 10 ms ticks over
    # a window this short, are tests/unit/test_contention.py's
    assert m["cpu/cores_per_device"] >= 0 and m["host/busy_cores"] >= 0
    assert 0 < m["step_time/median_ms"] <= m["step_time/p90_ms"]
    assert m["model/gflops_per_image"] > 0
    assert "mfu_pct" not in m  # no peak is known for a CPU
    # The proof that it trained, and the headline that says so.
    assert m["train/loss_last"] < m["train/loss_first"] < m["train/loss_initial"]
    assert m["train/loss_fell"] == 1.0 and m["train/skipped_steps"] == 0.0 and "train/loss_scale" not in m
    assert "0 steps skipped in the window" in proc.stdout + proc.stderr
    # Nothing after it but rn50's own lines: no library's exit-time report (issue 43 saw nanobind's leak lines)
    assert "nanobind" not in proc.stderr and "leaked" not in proc.stderr, proc.stderr[-2000:]
    assert p["data.batch_size"] == "4" and p["model.arch"] == "resnet18"
    assert p["precision.name"] == "fp32" and p["dist.accelerator"] == "cpu"
    assert p["mlflow.tracking_uri"] == f"sqlite:///{tmp_path}/mlflow.db"
    for tag in ("torch_version", "torchvision_version", "lightning_version", "cuda_version",
                "cudnn_version", "python_bytecode", "gpu_model", "hostnames", "command", "world_size"):
        assert t[tag], tag
    assert t["command"].startswith("python -m rn50 dist.accelerator=cpu")
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"resolved_config.yaml", "step_times.csv", "summary.json"} <= artifacts
    (summary_file,) = Path(t["output_dir"]).glob("summary.json")
    lines = summary_file.read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["run_id"] == run.info.run_id
    assert json.loads(lines[0])["train/loss_last"] == pytest.approx(m["train/loss_last"], rel=1e-5)
    steps = list(csv.DictReader(open(Path(t["output_dir"]) / "step_times.csv")))
    assert len(steps) == 3 and all(float(s["duration_ms"]) > 0 for s in steps)


# A host without a GPU, as CUDA and NVML see it (rn50/measure/nvml.py counts the visible ones).
NO_GPU = {"CUDA_VISIBLE_DEVICES": ""}


def test_no_arguments_on_a_host_without_a_gpu_finish_with_a_cpu_figure_labelled_cpu(tmp_path, compose_cfg):
    """The README's first command, as a new user runs it: device=auto takes the CPU profile
    (conf/device/cpu.yaml), says so in one line, and records the run as a CPU one."""
    proc = rn50(tmp_path, env=NO_GPU, fresh_store=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    profile = compose_cfg(["device=cpu"])
    said = [line for line in proc.stderr.splitlines() if "CPU profile" in line]
    assert len(said) == 1 and "no GPU on this host" in said[0], proc.stderr[-3000:]
    assert f"runs resnet50 at 224 px in fp32, batch {profile.data.batch_size}, " in said[0]
    run = only_run(tmp_path)
    p, t, m = run.data.params, run.data.tags, run.data.metrics
    assert run.info.status == "FINISHED" and t["command"] == "python -m rn50"
    assert run.info.run_name == f"resnet50-fp32-1n1g-bs{profile.data.batch_size}-cpu"
    assert (p["device"], p["dist.accelerator"], p["precision.name"]) == ("cpu", "cpu", "fp32")
    assert (p["bench.warmup_steps"], p["bench.steps"]) == (str(profile.bench.warmup_steps), str(profile.bench.steps))
    assert (t["accelerator"], t["gpu_model"]) == ("cpu", "none")
    assert m["throughput/images_per_sec"] > 0 and m["cpu/utilization_pct"] > 0
    # It trained: the profile's window starts after SGD's first overshoot, so its loss falls.
    assert m["train/loss_fell"] == 1 and m["train/loss_last"] < m["train/loss_first"], m
    assert "did not fall" not in proc.stderr
    assert f"resnet50-fp32-1n1g-bs{profile.data.batch_size}-cpu: " in proc.stderr  # the headline


def test_keys_given_win_over_the_cpu_profile_and_device_gpu_keeps_the_full_default(tmp_path):
    mine = rn50(tmp_path, "model=resnet18", "data.batch_size=4", "precision=bf16", "dry_run=true", env=NO_GPU)
    assert mine.returncode == 0, mine.stderr[-3000:]
    assert "the CPU profile (device=cpu) runs resnet18 at 224 px in bf16, batch 4, 3 warm-up" in mine.stderr
    assert mine.stdout.startswith("dist=1n1g: 1 cpu process(es)")
    full = rn50(tmp_path, "device=gpu", "dry_run=true", env=NO_GPU)
    assert full.returncode == 0, full.stderr[-3000:]
    assert "CPU profile" not in full.stderr and "precision=amp on the CPU" in full.stderr
    assert "falls back to the CPU; device=cpu sizes the run for it" in full.stderr


def test_auto_falls_back_to_cpu_and_keeps_the_profiler_report(tmp_path):
    args = [a for a in TINY if not a.startswith("dist.accelerator")] + ["profiler=simple"]
    proc = rn50(tmp_path, *args, env=NO_GPU)
    assert proc.returncode == 0, proc.stderr[-3000:]
    console = proc.stdout + proc.stderr
    assert "no GPU on this host: the CPU profile" in console  # a warning about the user's setup stays
    # ... while dependencies' known noise goes (rn50/console.py; tests/test_console.py shows it is there)
    assert not [n for n in ("litlogger", "GPU available:", "TPU available:", "LeafSpec", "max_steps=") if n in console]
    run = only_run(tmp_path)
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    reports = [a.path for a in client.list_artifacts(run.info.run_id) if "profiler" in a.path]
    assert reports, "SimpleProfiler's report is not an artifact"
    assert run.data.params["profiler.name"] == "simple"


def test_a_run_out_of_memory_is_marked_failed_in_one_line(tmp_path):
    # A batch no allocator can hold: a real out-of-memory error, from the CPU allocator here.
    proc = rn50(tmp_path, *TINY, "data.batch_size=100000000")
    assert proc.returncode == 1
    run = only_run(tmp_path)
    log = Path(run.data.tags["output_dir"]) / "rank0.log"
    errors = [l for l in proc.stderr.splitlines() if "error" in l.lower()]
    assert len(errors) == 1 and errors[0].startswith("rn50: error: rank 0 failed: oom at data.batch_size=100000000: ")
    assert "allocate memory" in errors[0] and errors[0].endswith(f"; traceback in {log}")
    assert "Traceback" not in proc.stderr and "Traceback" in log.read_text()  # the rank's output is in its log
    assert run.info.status == "FAILED"
    assert run.data.tags["failure"] == "oom"
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    assert "rank0.log" in {a.path for a in client.list_artifacts(run.info.run_id)}


BAD = {
    "unknown option": (["precision=amp16"], "precision=amp16 is not an option; did you mean amp? precision is one of:"),
    "unknown key": (["data.batch_sze=8"], "data.batch_sze: no such key; did you mean data.batch_size?"),
    "another option's key": (["precision.loss_scale=8"],
                             "precision.loss_scale is a key of precision=amp_static only; add precision=amp_static"),
    "another option's key with +": (["precision=fp32", "+precision.loss_scale=8"],
                                    "precision.loss_scale is a key of precision=amp_static only"),
    "zero batch": (["data.batch_size=0"], "data.batch_size"),
    "negative lr": (["optim.lr=-1"], "optim.lr=-1.0 is out of range"),
    "tiny image": (["data.image_size=8"], "data.image_size"),
    "too many gpus": (["dist=1n8g", "dist.accelerator=gpu"], "needs 8 GPUs"),
    "nodes on local": (["dist=2n8g"], "needs 2 nodes"),
    "no server": (["mlflow.tracking_uri=http://127.0.0.1:9"], "http://127.0.0.1:9 is unreachable"),
    "bad sqlite path": (["mlflow.tracking_uri=sqlite:////dev/null/m.db"], "cannot be opened"),
    "mistyped scheme": (["mlflow.tracking_uri=htp://127.0.0.1:5000"], "unknown scheme 'htp'"),
    "unwritable output": (["hydra.run.dir=/proc/rn50-out"], "cannot write /proc/rn50-out"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_line_and_no_run(tmp_path, case):
    overrides, expected = BAD[case]
    if case == "too many gpus" and torch.cuda.device_count() >= 8:
        pytest.skip("this host has 8 GPUs")
    proc = rn50(tmp_path, *TINY, *overrides)
    assert proc.returncode != 0
    errors = [l for l in proc.stderr.splitlines() if "error" in l.lower()]
    assert len(errors) == 1 and errors[0].startswith("rn50: error: "), proc.stderr[-2000:]
    assert expected in errors[0]
    assert not runs_in(tmp_path)
