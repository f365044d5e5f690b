"""Sweep report rows and files from a real sqlite store: device names, CSV, JSON, plots, Description,
energy columns and the chosen batch, and profiled runs that are no speedup reference."""

import csv
import json

import pytest

from helpers.compose import compose_as_hydra
from helpers.store import empty_store_in
from rn50.results import report
from rn50.results.collect import collect
from rn50.results.rows import rounded
from rn50 import tracking
from rn50.launcher import lifecycle
from rn50.measure.nvml import energy_metrics


@pytest.fixture(scope="module")
def uri(tmp_path_factory):
    uri = empty_store_in(tmp_path_factory.mktemp("report"))
    for accelerator, batch, ips in (("cpu", 2, 1.5), ("cpu", 4, 2.5), ("gpu", 256, 2800.0)):
        cfg = compose_as_hydra([f"mlflow.tracking_uri={uri}", f"dist.accelerator={accelerator}",
                                f"data.batch_size={batch}"])
        run_id = lifecycle.start_run(cfg, f"{accelerator}-bs{batch}", {})
        metrics = {"throughput/images_per_sec": ips, "data/wait_pct": 1.23456, "cpu/cores_per_device": 2.5,
                   "host/busy_cores": 11.0}
        if accelerator == "gpu":
            metrics.update({"gpu/utilization_pct": 97.6543, "mfu_pct": 41.23})
        tracking.runs.log_results(uri, run_id, metrics, tags={"accelerator": "cuda" if accelerator == "gpu" else "cpu"})
        tracking.runs.end_run(uri, run_id, ok=True)
    return uri


def rows_of(uri, accelerator):
    return collect(uri, experiment="rn50", filter_string=f"tags.accelerator = '{accelerator}'")


def header(rows):
    return report.markdown(rows).splitlines()[0]


def test_cpu_runs_are_labelled_as_cpu_processes(uri):
    cpu = header(rows_of(uri, "cpu"))
    assert "| CPU processes |" in cpu and "| batch per process |" in cpu
    assert "GPU" not in cpu  # no GPU util column either
    gpu = header(rows_of(uri, "cuda"))
    assert "| GPUs |" in gpu and "| batch per GPU |" in gpu and "| GPU util % |" in gpu
    both = collect(uri, experiment="rn50")
    assert "| devices (GPUs or CPU processes) |" in header(both) and "| GPU util % |" in header(both)
    # each CPU row says so, in the table and in the plots' legends, which take the model's cell
    assert sorted(r["model"] for r in both) == ["resnet50", "resnet50 on CPU", "resnet50 on CPU"]
    assert [r["accelerator"] for r in both if r["model"] == "resnet50 on CPU"] == ["cpu", "cpu"]


def test_figures_are_rounded_for_people(uri):
    (row,) = report.markdown(rows_of(uri, "cuda")).splitlines()[2:]
    assert "| 2800 |" in row and "| 97.65 |" in row and "| 41.23 |" in row and "| 1.23 |" in row
    assert [rounded(v) for v in (2843.71, 123.456, 1.2149, 0.0, None, 3)] == ["2844", "123.5", "1.21", "0", "-", "3"]


def test_files_of_a_one_device_count_cpu_sweep(uri, tmp_path):
    files = report.write(rows_of(uri, "cpu"), tmp_path)
    assert [f.name for f in files] == ["sweep_report.md", "sweep_report.csv", "sweep_report.json",
                                       "throughput_vs_batch.png"]  # no speedup plot of one dot
    with open(tmp_path / "sweep_report.csv") as f:
        head = next(csv.reader(f))
    assert len(head) == len(set(head)) and "accelerator" in head
    for row in json.loads((tmp_path / "sweep_report.json").read_text()):
        assert "mfu.peaks." not in row["setup"] and "mfu.peak_tflops=None" in row["setup"]
        assert row["accelerator"] == "cpu"


def test_description_is_the_table_cut_at_a_row(uri):
    rows = collect(uri, experiment="rn50")
    text = report.description(rows)
    assert text.startswith("**3 points: 3 finished.**")
    assert "| 2800 |" in text and "| 2.50 |" in text and "| 1.50 |" in text
    short = report.description(rows, limit=len(text) - 1)
    assert short.endswith("1 more rows in sweep_report.md (artifacts).\n") and len(short) < len(text)


def test_summary_metrics_are_logged_as_the_ui_should_show_them(tmp_path):
    from mlflow.tracking import MlflowClient

    uri = empty_store_in(tmp_path)  # a copy: making a store's schema takes seconds
    client = MlflowClient(uri)
    run_id = client.create_run(client.create_experiment("rounding")).info.run_id
    tracking.runs.log_results(uri, run_id, {"throughput/images_per_sec": 6223.510416486892, "mfu_pct": 15.284572746490362},
                         series={"step_time_ms": [41.123456789]})
    run = client.get_run(run_id)
    assert run.data.metrics == {"throughput/images_per_sec": 6223.51, "mfu_pct": 15.2846, "step_time_ms": 41.123456789}


def test_profiled_runs_are_no_speedup_reference():
    from rn50.results.scaling import add_scaling

    def row(gpus, ips, profiled):
        return {"setup": "model.arch=resnet50", "gpus": gpus, "status": "FINISHED", "failure": "",
                "images_per_sec_median": ips, "profiled": profiled}

    rows = add_scaling([row(1, 1000.0, False), row(1, 500.0, True), row(2, 1800.0, False)])
    assert [r["speedup"] for r in rows] == [1.0, 0.5, 1.8]  # all against the unprofiled 1000


def test_ncu_runs_have_no_throughput_in_reports(compose_cfg, tmp_path):
    # ncu intercepts every kernel launch of the measured window too (benchmarks/notes/2026-11-22-profilers-h100.md).
    uri = empty_store_in(tmp_path)  # a copy: making a store's schema takes seconds
    for profiler in ("none", "ncu", "pytorch"):
        cfg = compose_cfg([f"profiler={profiler}", f"mlflow.tracking_uri={uri}"])
        run_id = lifecycle.start_run(cfg, profiler, {})
        tracking.runs.log_results(uri, run_id, {"throughput/images_per_sec": 1000.0})
        tracking.runs.end_run(uri, run_id, ok=True)
    rows = {r["point"]: r for r in collect(uri, experiment="rn50")}
    assert rows["ncu"]["images_per_sec_median"] is None and rows["ncu"]["speedup"] is None
    assert rows["pytorch"]["images_per_sec_median"] == 1000.0 and rows["none"]["speedup"] == 1.0


def test_the_sweep_report_has_energy_columns_and_the_chosen_batch(compose_cfg, tmp_path):
    uri = empty_store_in(tmp_path)  # a copy: making a store's schema takes seconds
    for batch, chosen in (("256", None), ("auto", 448)):
        cfg = compose_cfg([f"data.batch_size={batch}", f"mlflow.tracking_uri={uri}"])
        run_id = lifecycle.start_run(cfg, f"bs{batch}", {})
        metrics = {"throughput/images_per_sec": 1000.0, **energy_metrics({0: 250.0}, 1000)}
        tracking.runs.log_results(uri, run_id, {**metrics, **({"data.batch_size_chosen": chosen} if chosen else {})})
        tracking.runs.end_run(uri, run_id, ok=True)
    rows = {r["point"]: r for r in collect(uri, experiment="rn50")}
    assert rows["bs256"]["batch_per_gpu"] == 256 and rows["bsauto"]["batch_per_gpu"] == 448
    assert rows["bsauto"]["images_per_joule"] == pytest.approx(4.0)
    assert rows["bsauto"]["joules_per_image"] == pytest.approx(0.25)
    header = report.markdown(list(rows.values())).splitlines()[0]
    assert "images/J" in header and "J/image" in header


def test_the_cpu_a_point_used_is_a_column(uri):
    rows = rows_of(uri, "cuda")
    assert rows[0]["cpu_cores_per_device"] == 2.5 and rows[0]["host_busy_cores"] == 11.0
    assert "| CPU cores per GPU | host busy cores |" in header(rows)
    assert "| CPU cores per process |" in header(rows_of(uri, "cpu"))


def test_input_bound_comes_from_the_runs_data_wait(uri):
    rows = collect(uri, experiment="rn50")
    assert {r["input_bound"] for r in rows} == {"no"}  # 1.2% wait: none is, so the table has no column
    assert "input-bound" not in header(rows)
    rows[0]["data_wait_pct"], rows[0]["input_bound"] = 30.0, "yes"
    assert "| input-bound |" in header(rows)


@pytest.mark.parametrize("busy,bound", [(89.7, "yes"), (99.4, "no")])
def test_a_point_that_waited_is_input_bound_only_where_its_gpus_had_time_to_spare(tmp_path, busy, bound):
    """experiment=fastest with data=dali waited 72% at 0.992 of synthetic, its GPU 99.4% busy (issue 44)."""
    uri = empty_store_in(tmp_path)
    cfg = compose_as_hydra([f"mlflow.tracking_uri={uri}"])
    run_id = lifecycle.start_run(cfg, "dali", {})
    tracking.runs.log_results(uri, run_id, {"throughput/images_per_sec": 7803.5, "data/wait_pct": 72.3,
                                            "gpu/utilization_pct": busy}, tags={"accelerator": "cuda"})
    tracking.runs.end_run(uri, run_id, ok=True)
    (row,) = collect(uri, experiment="rn50")
    assert row["input_bound"] == bound


def test_a_dali_point_reads_against_the_synthetic_point_of_its_settings(tmp_path):
    uri = empty_store_in(tmp_path)
    for data, ips in (("synthetic", 6000.0), ("dali", 4200.0)):
        cfg = compose_as_hydra([f"mlflow.tracking_uri={uri}", "dist.accelerator=gpu", f"data={data}",
                                *(["data.root=/data/imagenet"] if data == "dali" else [])])
        run_id = lifecycle.start_run(cfg, data, {})
        tracking.runs.log_results(uri, run_id, {"throughput/images_per_sec": ips, "data/wait_pct": 2.0},
                                  tags={"accelerator": "cuda"})
        tracking.runs.end_run(uri, run_id, ok=True)
    rows = {r["point"]: r for r in collect(uri, experiment="rn50")}
    assert rows["dali"]["vs_synthetic"] == pytest.approx(0.7) and rows["synthetic"]["vs_synthetic"] is None
    assert "| x synthetic |" in header(list(rows.values()))
