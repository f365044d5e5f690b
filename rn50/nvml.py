"""GPU telemetry through NVML: a background sampler per rank and its summaries.

MLflow's own system-metrics monitor neither starts under Lightning nor reads SM
clocks or temperature, so rn50 samples NVML itself. Each rank samples the one
GPU it trains on, found by UUID so CUDA_VISIBLE_DEVICES cannot mislabel it.
"""

import csv
import functools
import math
import os
import statistics
import threading
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

FIELDS = ("utilization_pct", "memory_used_gib", "power_w", "sm_clock_mhz", "temperature_c")
Sample = Tuple[float, ...]  # (seconds since start, *FIELDS)


@functools.lru_cache(maxsize=None)
def _nvml():
    import pynvml

    pynvml.nvmlInit()
    return pynvml


def handle_for_cuda_device(index: int):
    """The NVML handle of torch's CUDA device `index`."""
    import torch

    nvml = _nvml()
    uuid = str(torch.cuda.get_device_properties(index).uuid)
    return nvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")


def driver_version() -> Optional[str]:
    try:
        return _nvml().nvmlSystemGetDriverVersion()
    except Exception:  # no NVML library on CPU-only hosts
        return None


def read(handle) -> Tuple[float, ...]:
    """One reading of FIELDS; a value the GPU does not report is NaN."""
    nvml = _nvml()

    def get(fn: Callable[[], float]) -> float:
        try:
            return float(fn())
        except nvml.NVMLError:
            return math.nan

    return (
        get(lambda: nvml.nvmlDeviceGetUtilizationRates(handle).gpu),
        get(lambda: nvml.nvmlDeviceGetMemoryInfo(handle).used / 2**30),
        get(lambda: nvml.nvmlDeviceGetPowerUsage(handle) / 1e3),
        get(lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
        get(lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)),
    )


class Sampler:
    """Reads one GPU every `interval_s` seconds on a daemon thread between start() and stop()."""

    def __init__(self, reader: Callable[[], Sequence[float]], interval_s: float, now=time.monotonic):
        self.reader, self.interval_s, self.now = reader, interval_s, now
        self.samples: List[Sample] = []
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def start(self) -> None:
        self._t0 = self.now()
        self._thread = threading.Thread(target=self._run, name="rn50-nvml", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            self.samples.append((self.now() - self._t0, *self.reader()))
            if self._stop.wait(self.interval_s):
                return

    def stop(self) -> List[Sample]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return self.samples


def _finite(values):
    return [v for v in values if not math.isnan(v)]


def summarize(per_gpu: Dict[int, Sequence[Sample]]) -> Dict[str, float]:
    """gpu{i}/<field> (mean) and gpu{i}/<field>_max for each GPU, plus gpu/<field> over all GPUs."""
    metrics: Dict[str, float] = {}
    for i, samples in sorted(per_gpu.items()):
        for col, name in enumerate(FIELDS, start=1):
            values = _finite(s[col] for s in samples)
            if values:
                metrics[f"gpu{i}/{name}"] = statistics.fmean(values)
                metrics[f"gpu{i}/{name}_max"] = max(values)
    for name in FIELDS:
        means = [metrics[f"gpu{i}/{name}"] for i in per_gpu if f"gpu{i}/{name}" in metrics]
        if means:
            metrics[f"gpu/{name}"] = statistics.fmean(means)
            metrics[f"gpu/{name}_min"] = min(means)
    return metrics


def write_csv(path, per_gpu: Dict[int, Sequence[Sample]]) -> None:
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(("gpu", "time_s", *FIELDS))
        for i, samples in sorted(per_gpu.items()):
            out.writerows((i, *s) for s in samples)


def visible_gpu_count() -> int:
    """The GPUs CUDA would show this process, counted through NVML so that no CUDA context
    (or torch import) is needed: NVML's count, narrowed by CUDA_VISIBLE_DEVICES."""
    try:
        count = _nvml().nvmlDeviceGetCount()
    except Exception:  # no driver or no NVML library: no GPU
        return 0
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return count
    shown = 0
    for entry in visible.split(","):  # CUDA stops at the first entry that names no device
        entry = entry.strip()
        if not entry or entry.startswith("-"):
            break
        shown += 1
    return min(shown, count)
