"""A sweep report's scaling and communication columns, from rows as rn50/results/report.py builds them:
speedup, the step time several devices took beyond one device's, the share of the all-reduce hidden."""

import pytest

from rn50.results import report
from rn50.results.rows import add_vs_synthetic, setup
from rn50.results.scaling import add_scaling, scaling_lines, scaling_metrics


def row(gpus, ips, status="FINISHED", allreduce=None, busbw=None, transport=None, failure=""):
    return {"run_id": f"run{gpus}{status}", "point": f"p{gpus}", "setup": "same", "accelerator": "cuda",
            "model": "resnet50", "precision": "amp", "nodes": 1, "gpus": gpus, "batch_per_gpu": 256,
            "images_per_sec_median": ips, "status": status, "failure": failure, "profiled": False,
            "allreduce_ms": allreduce, "busbw_GBps": busbw, "transport": transport}


@pytest.fixture
def rows():
    # 1 GPU: 5,000 images/sec is 51.2 ms a step; 4 GPUs at 19,000: 53.9 ms, 2.7 ms beyond it.
    return add_scaling([row(1, 5000.0), row(4, 19000.0, allreduce=2.0, busbw=153.0, transport="P2P/NVLink"),
                               row(2, None, status="FAILED", failure="oom")])


def test_exposed_time_and_hidden_share_follow_from_the_1_device_point(rows):
    one, four, failed = rows
    assert four["speedup"] == pytest.approx(3.8) and four["scaling_efficiency_pct"] == pytest.approx(95.0)
    assert four["comm_exposed_ms"] == pytest.approx(1e3 * 256 * 4 / 19000 - 1e3 * 256 / 5000)
    # 2.69 ms beyond one GPU's step, longer than the 2 ms the all-reduce takes alone: none of it hidden
    assert four["comm_hidden_pct"] == 0.0
    for r in (one, failed):  # one device has no communication; a failed point has no figure
        assert r["comm_exposed_ms"] is None and r["comm_hidden_pct"] is None


def test_a_step_within_noise_of_one_devices_hides_everything():
    _, two = add_scaling([row(1, 5000.0), row(2, 10010.0, allreduce=1.0, busbw=100.0)])
    assert two["comm_exposed_ms"] == 0.0 and two["comm_hidden_pct"] == 100.0
    _, half = add_scaling([row(1, 5000.0), row(2, 1e3 * 512 / (51.2 + 0.5), allreduce=2.0, busbw=100.0)])
    assert half["comm_exposed_ms"] == pytest.approx(0.5) and half["comm_hidden_pct"] == pytest.approx(75.0)


def test_the_table_shows_the_columns_with_a_dash_where_a_point_has_none(rows):
    lines = report.markdown(rows).splitlines()
    header = [h.strip() for h in lines[0].strip("|").split("|")]
    for name in ("all-reduce ms", "bus GB/s", "exposed ms/step", "hidden %", "transport"):
        assert name in header
    cells = [dict(zip(header, (c.strip() for c in line.strip("|").split("|")))) for line in lines[2:5]]
    assert [c["all-reduce ms"] for c in cells] == ["-", "2.00", "-"]
    assert [c["transport"] for c in cells] == ["-", "P2P/NVLink", "-"]
    assert [c["exposed ms/step"] for c in cells] == ["-", "2.69", "-"]
    assert lines[-1] == ("- resnet50 amp bs256, 4 GPUs: 95.0% scaling; all-reduce 2.00 ms at 153.0 GB/s over "
                         "P2P/NVLink, and a step takes 2.69 ms more than on 1 GPU: more than the all-reduce alone, "
                         "so DDP's own work (bucket copies, kernels beside the collective) shows too")
    two = add_scaling([row(1, 5000.0), row(2, 1e3 * 512 / (51.2 + 0.5), allreduce=2.0, busbw=100.0)])
    assert scaling_lines(two) == ["resnet50 amp bs256, 2 GPUs: 99.0% scaling; all-reduce 2.00 ms at "
                                         "100.0 GB/s, 0.50 ms of it exposed per step (75% hidden)"]


def test_a_point_whose_network_changed_under_it_says_so_in_its_scaling_line():
    moved = {**row(2, 1e3 * 512 / (51.2 + 0.5), allreduce=2.0, busbw=100.0), "allreduce_before_ms": 1.2,
             "network_changed": True}
    _, two = add_scaling([row(1, 5000.0), moved])
    assert scaling_lines([two]) == ["resnet50 amp bs256, 2 GPUs: 99.0% scaling; all-reduce 2.00 ms at 100.0 GB/s "
                                    "(1.20 ms before the warm-up: the network changed under it), 0.50 ms of it "
                                    "exposed per step (75% hidden)"]
    _, held = add_scaling([row(1, 5000.0), {**moved, "network_changed": False}])
    assert "before the warm-up" not in scaling_lines([held])[0]


def test_one_device_sweeps_have_no_communication_columns():
    rows = add_scaling([row(1, 5000.0), {**row(1, 5100.0), "batch_per_gpu": 512}])
    header = report.markdown(rows).splitlines()[0]
    assert "all-reduce" not in header and "transport" not in header
    assert scaling_lines(rows) == []


def test_the_sweep_logs_what_it_found_into_each_point_of_several_devices(rows):
    assert scaling_metrics(rows) == {"run4FINISHED": {
        "scaling/speedup": pytest.approx(3.8), "scaling/efficiency_pct": pytest.approx(95.0),
        "comm/exposed_ms_per_step": pytest.approx(2.6947, abs=1e-4), "comm/hidden_pct": 0.0}}


def test_a_real_data_point_is_set_against_the_synthetic_point_of_its_settings():
    def point(data, gpus, ips, batch=256, status="FINISHED", setup="amp"):
        return {**row(gpus, ips, status=status), "run_id": f"{data}{gpus}{batch}", "data": data, "batch_per_gpu": batch,
                "input_setup": setup, "image_size": "224"}

    rows = add_vs_synthetic([point("synthetic", 1, 6000.0), point("dali", 1, 5880.0), point("synthetic", 4, 23000.0),
                             point("dali", 4, 16100.0), point("imagefolder", 4, 4900.0, batch=128),  # no synthetic at 128
                             point("dali", 4, 9000.0, setup="bf16"), point("dali", 4, None, status="FAILED")])
    assert [r["vs_synthetic"] for r in rows] == [None, pytest.approx(0.98), None, pytest.approx(0.7), None, None, None]
    table = report.markdown(rows)
    assert "| x synthetic |" in table.splitlines()[0] and "| 0.70 |" in table
    assert "x synthetic" not in report.markdown(rows[:1] + rows[2:3])  # synthetic alone: no column


@pytest.mark.parametrize("reference", [
    {"accelerator": "cpu"},  # a CPU run is no reference for a GPU run
    {"image_size": "128"},  # nor a run at another image size
    {"profiled": True},  # nor a profiled one: the profiler's steps are not the figure's
])
def test_a_synthetic_point_of_other_settings_is_no_reference(reference):
    def point(data, **extra):
        return {**row(1, 6000.0 if data == "synthetic" else 5000.0), "run_id": data, "data": data,
                "input_setup": "amp", "image_size": "224", **extra}

    synthetic, dali = add_vs_synthetic([point("synthetic", **reference), point("dali")])
    assert dali["vs_synthetic"] is None and synthetic["vs_synthetic"] is None


def test_a_point_compiled_either_way_for_ddp_scales_against_the_same_one_device_point():
    """model.compile_ddp changes nothing on one device (no DDP): the 1-GPU point, and one recorded before the
    key existed, is the reference of a multi-GPU point whichever way it compiled."""
    one = {"model.compile": "True", "dist.gpus_per_node": "1", "data.batch_size": "512"}
    two = {"model.compile": "True", "dist.gpus_per_node": "2", "data.batch_size": "512"}
    assert setup({**two, "model.compile_ddp": "no_optimization"}) == setup({**one, "model.compile_ddp": "ddp_optimizer"})
    assert setup({**two, "model.compile_ddp": "ddp_optimizer"}) == setup(one)
    assert setup({**two, "data.batch_size": "256"}) != setup(one)  # what does change a figure still tells them apart


def clocked(gpus, ips, mean_mhz, slowest_mhz, **kw):
    return {**row(gpus, ips, **kw), "sm_clock_mhz": mean_mhz, "sm_clock_mhz_min": slowest_mhz}


def test_a_slower_clock_on_the_slowest_device_is_counted_before_blaming_ddp():
    """2 H200s, 2026-11-28 (docs/benchmarks.md): at their power limit the two GPUs of the 2-GPU point clocked
    1871 and 1964 MHz against 1924 MHz for the 1-GPU point; DDP waits for the slower one each step."""
    one, two = add_scaling([clocked(1, 6044.0, 1923.5, 1923.5),
                            clocked(2, 11636.3, 1917.5, 1871.1, allreduce=1.0, busbw=190.0)])
    assert one["slowest_clock_pct"] is None  # its own reference
    assert two["slowest_clock_pct"] == pytest.approx(100 * 1871.1 / 1923.5)
    ref_ms = 1e3 * 256 / 6044.0
    assert two["clock_ms"] == pytest.approx(ref_ms * 1923.5 / 1871.1 - ref_ms)  # 1.19 of the 1.64 ms beyond
    assert scaling_lines([one, two]) == [
        "resnet50 amp bs256, 2 GPUs: 96.3% scaling; all-reduce 1.00 ms at 190.0 GB/s, and a step takes 1.64 ms "
        "more than on 1 GPU: no more than the all-reduce alone if the slower clock costs all of its 1.19 ms; its "
        "slowest GPU ran at 1871 MHz against 1924 MHz on 1 GPU (97.3%), up to 1.19 ms a step"]
    assert scaling_metrics([one, two])["run2FINISHED"]["scaling/slowest_clock_pct"] == pytest.approx(97.28, abs=0.01)
    header = report.markdown([one, two]).splitlines()[0]
    assert "slowest GPU clock %" in header and "| 97.28 |" in report.markdown([one, two])


def test_a_clock_within_a_percent_or_unrecorded_changes_nothing_said():
    base = [clocked(1, 5000.0, 1900.0, 1900.0)]
    _, near = add_scaling(base + [clocked(4, 19000.0, 1900.0, 1890.0, allreduce=2.0, busbw=153.0)])
    assert near["slowest_clock_pct"] == pytest.approx(99.47, abs=0.01)
    assert scaling_lines([near])[0].endswith("so DDP's own work (bucket copies, kernels beside the collective) shows too")
    # a clock low enough to name, but the step still grew by more than the all-reduce and the clock together
    _, slow = add_scaling(base + [clocked(4, 17000.0, 1880.0, 1850.0, allreduce=2.0, busbw=153.0)])
    assert "more than the all-reduce alone, so DDP's own work" in scaling_lines([slow])[0]
    assert scaling_lines([slow])[0].endswith("(97.4%), up to 1.38 ms a step")
    # runs recorded before the clocks were read: no column, the sentence as before
    rows = add_scaling([row(1, 5000.0), row(4, 19000.0, allreduce=2.0, busbw=153.0)])
    assert rows[1]["slowest_clock_pct"] is None and "clock" not in report.markdown(rows)


def test_the_clock_explains_at_most_what_the_step_grew():
    # 1850 against 1900 MHz bounds 1.38 ms, but the step grew 0.26 ms: the sentence says 0.26 at most
    _, two = add_scaling([clocked(1, 5000.0, 1900.0, 1900.0),
                          clocked(2, 1e3 * 512 / (51.2 + 0.26), 1870.0, 1850.0, allreduce=2.0, busbw=100.0)])
    assert two["clock_ms"] == pytest.approx(1.38, abs=0.01)
    assert scaling_lines([two])[0].endswith("0.26 ms of it exposed per step (87% hidden); its slowest GPU ran at "
                                            "1850 MHz against 1900 MHz on 1 GPU (97.4%), up to 0.26 ms a step")
    _, same = add_scaling([clocked(1, 5000.0, 1900.0, 1900.0), clocked(2, 10010.0, 1870.0, 1850.0, allreduce=1.0)])
    assert scaling_lines([same])[0].endswith("on 1 GPU (97.4%)")  # no step growth: no ms to give the clock


@pytest.mark.parametrize("points", [
    # the 1-GPU point read its clock, the 2-GPU point was recorded before the clocks were
    [clocked(1, 5000.0, 1900.0, 1900.0), row(2, 9000.0, allreduce=2.0, busbw=100.0)],
    # a CPU process's reading is no reference for a GPU's (no clock on CPUs; the key keeps them apart anyway)
    [{**clocked(1, 5000.0, 1900.0, 1900.0), "accelerator": "cpu"}, clocked(1, 5000.0, None, None),
     clocked(2, 9000.0, 1850.0, 1800.0, allreduce=2.0, busbw=100.0)],
])
def test_no_clock_figure_without_both_readings_of_one_device_kind(points):
    two = add_scaling(points)[-1]
    assert two["speedup"] is not None and two["slowest_clock_pct"] is None
    assert "MHz" not in scaling_lines([two])[0]
