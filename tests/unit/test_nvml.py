"""NVML sampling logic with a scripted reader, so it runs without a GPU."""

import csv
import math
import time

import pytest

from rn50.measure import nvml


def test_sampler_reads_until_stopped():
    readings = iter(range(10_000))
    sampler = nvml.Sampler(lambda: (float(next(readings)),) * 5, interval_s=0.01)
    sampler.start()
    time.sleep(0.1)
    samples = sampler.stop()
    assert len(samples) >= 3
    assert [s[1] for s in samples] == sorted(s[1] for s in samples)
    times = [s[0] for s in samples]
    assert times[0] >= 0 and times == sorted(times)
    count = len(sampler.samples)
    time.sleep(0.05)
    assert len(sampler.samples) == count  # the thread is gone


def test_summary_has_mean_max_per_gpu_and_mean_over_gpus():
    per_gpu = {
        0: [(0.0, 90.0, 10.0, 300.0, 1980.0, 50.0), (0.2, 100.0, 10.0, 500.0, 1980.0, 60.0)],
        1: [(0.0, 80.0, 12.0, 400.0, 1900.0, math.nan)],
    }
    m = nvml.telemetry_metrics(per_gpu)
    assert m["gpu0/utilization_pct"] == pytest.approx(95.0)
    assert m["gpu0/utilization_pct_max"] == 100.0
    assert m["gpu0/power_w"] == pytest.approx(400.0)
    assert m["gpu1/sm_clock_mhz"] == 1900.0
    assert "gpu1/temperature_c" not in m  # not reported, not invented
    assert m["gpu/utilization_pct"] == pytest.approx(87.5)
    assert m["gpu/utilization_pct_min"] == pytest.approx(80.0)
    assert m["gpu0/memory_used_gib"] == pytest.approx(10.0)


def test_the_jpeg_decoders_busy_share_is_summarised_and_older_samples_still_are():
    # the hardware JPEG decoders at 40% and 60% on GPU 0; GPU 1's samples from before the field existed
    per_gpu = {0: [(0.0, 90.0, 10.0, 300.0, 1980.0, 50.0, 40.0), (0.2, 90.0, 10.0, 300.0, 1980.0, 50.0, 60.0)],
               1: [(0.0, 80.0, 12.0, 400.0, 1900.0, 55.0)]}
    m = nvml.telemetry_metrics(per_gpu)
    assert m["gpu0/jpeg_utilization_pct"] == pytest.approx(50.0) and m["gpu0/jpeg_utilization_pct_max"] == 60.0
    assert "gpu1/jpeg_utilization_pct" not in m and m["gpu1/temperature_c"] == 55.0
    assert m["gpu/jpeg_utilization_pct"] == pytest.approx(50.0)


def test_csv_has_one_row_per_sample(tmp_path):
    per_gpu = {0: [(0.0, 1, 2, 3, 4, 5)], 3: [(0.1, 6, 7, 8, 9, 10), (0.2, 1, 1, 1, 1, 1)]}
    nvml.write_csv(tmp_path / "t.csv", per_gpu)
    rows = list(csv.DictReader(open(tmp_path / "t.csv")))
    assert [r["gpu"] for r in rows] == ["0", "3", "3"]
    assert set(rows[0]) == {"gpu", "time_s", *nvml.FIELDS}


@pytest.mark.gpu
def test_reads_a_real_gpu():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    from rn50.measure.device import handle_for_cuda_device

    values = nvml.read(handle_for_cuda_device(0))
    assert len(values) == len(nvml.FIELDS) and values[3] > 0
    jpeg = values[nvml.FIELDS.index("jpeg_utilization_pct")]  # NaN where the GPU has no JPEG decoder
    assert math.isnan(jpeg) or 0 <= jpeg <= 100
