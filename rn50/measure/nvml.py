"""GPU telemetry through NVML: a background sampler per rank and its summaries, and energy.

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

import pynvml

# jpeg_utilization_pct: the GPU's hardware JPEG decoders (NVJPG) busy, where data.dali.hw_decoder_load gives
# them images; nvJPEG's CUDA decoding counts in utilization_pct, DALI's CPU decoding in cpu/cores_per_device.
FIELDS = ("utilization_pct", "memory_used_gib", "power_w", "sm_clock_mhz", "temperature_c", "jpeg_utilization_pct")
Sample = Tuple[float, ...]  # (seconds since start, *FIELDS)


@functools.lru_cache(maxsize=None)
def library():
    """NVML, initialized once per process."""
    pynvml.nvmlInit()
    return pynvml


def driver_version() -> Optional[str]:
    try:
        return library().nvmlSystemGetDriverVersion()
    except Exception:  # no NVML library on CPU-only hosts
        return None


def read(handle) -> Tuple[float, ...]:
    """One reading of FIELDS; a value the GPU does not report is NaN."""
    nvml = library()

    def get(fn: Callable[[], float]) -> float:
        try:
            return float(fn())
        except (nvml.NVMLError, AttributeError):  # AttributeError: a pynvml older than the call
            return math.nan

    return (
        get(lambda: nvml.nvmlDeviceGetUtilizationRates(handle).gpu),
        get(lambda: nvml.nvmlDeviceGetMemoryInfo(handle).used / 2**30),
        get(lambda: nvml.nvmlDeviceGetPowerUsage(handle) / 1e3),
        get(lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
        get(lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)),
        get(lambda: nvml.nvmlDeviceGetJpgUtilization(handle)[0]),  # (utilization %, sampling period)
    )


def energy_mj(handle) -> Optional[float]:
    """The GPU's NVML energy counter in millijoules (since the driver loaded; Volta and newer),
    or None where the GPU or driver has none."""
    nvml = library()
    try:
        return float(nvml.nvmlDeviceGetTotalEnergyConsumption(handle))
    except nvml.NVMLError:
        return None


class Sampler:
    """Reads one GPU every `interval_s` seconds on a daemon thread between start() and stop().

    With `energy_counter` (a reader of a millijoule counter such as `energy_mj`), start() and
    stop() also read the counter, at the edges of the sampled span: joules() is their difference.
    """

    def __init__(self, reader: Callable[[], Sequence[float]], interval_s: float, now=time.monotonic,
                 energy_counter: Optional[Callable[[], Optional[float]]] = None):
        self.reader, self.interval_s, self.now = reader, interval_s, now
        self.energy_counter = energy_counter
        self.samples: List[Sample] = []
        self.duration_s: Optional[float] = None
        self.counter_mj: Tuple[Optional[float], Optional[float]] = (None, None)
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def _count(self) -> Optional[float]:
        return self.energy_counter() if self.energy_counter else None

    def start(self) -> None:
        self.counter_mj = (self._count(), None)
        self._t0 = self.now()
        self._thread = threading.Thread(target=self._run, name="rn50-nvml", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            self.samples.append((self.now() - self._t0, *self.reader()))
            if self._stop.wait(self.interval_s):
                return

    def stop(self) -> List[Sample]:
        self.duration_s = self.now() - self._t0
        self.counter_mj = (self.counter_mj[0], self._count())
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return self.samples

    @property
    def energy_source(self) -> Optional[str]:
        """nvml_counter, power_samples (the counter is missing or did not move), or None."""
        first, last = self.counter_mj
        if first is not None and last is not None and last > first:
            return "nvml_counter"
        return "power_samples" if self._integrated() is not None else None

    def joules(self) -> Optional[float]:
        """Energy the GPU used between start() and stop(), from the source above."""
        if self.energy_source == "nvml_counter":
            return (self.counter_mj[1] - self.counter_mj[0]) / 1e3
        return self._integrated()

    def _integrated(self) -> Optional[float]:
        if self.duration_s is None:
            return None
        power = 1 + FIELDS.index("power_w")
        return integrate_power([(s[0], s[power]) for s in self.samples], self.duration_s)


def integrate_power(points: Sequence[Tuple[float, float]], end_s: float) -> Optional[float]:
    """Joules from (seconds since the start, watts) samples over [0, end_s]: the trapezoid rule
    between samples, each end held at its nearest sample's power. None without a finite sample."""
    points = sorted((t, w) for t, w in points if not math.isnan(w) and 0 <= t <= end_s)
    if not points:
        return None
    joules = points[0][1] * points[0][0] + points[-1][1] * (end_s - points[-1][0])
    for (t0, w0), (t1, w1) in zip(points, points[1:]):
        joules += (w0 + w1) / 2 * (t1 - t0)
    return joules


def energy_metrics(per_gpu_joules: Dict[int, float], images) -> Dict[str, float]:
    """energy/joules_per_image and energy/images_per_joule for the whole run (all GPUs' joules over
    all their images), energy/joules, and gpu{i}/joules_per_image and gpu{i}/energy_joules.

    per_gpu_joules: rank -> joules its GPU used over the measured windows (ranks without a figure
    left out). images: the images each rank trained in those windows, one number for every rank
    or a dict rank -> images.
    """
    metrics: Dict[str, float] = {}
    per_rank = images if isinstance(images, dict) else {i: images for i in per_gpu_joules}
    total_j = total_images = 0.0
    for i, joules in sorted(per_gpu_joules.items()):
        if joules is None or not joules > 0 or not per_rank.get(i):
            continue
        metrics[f"gpu{i}/energy_joules"] = joules
        metrics[f"gpu{i}/joules_per_image"] = joules / per_rank[i]
        total_j += joules
        total_images += per_rank[i]
    if total_j > 0:
        metrics["energy/joules"] = total_j
        metrics["energy/joules_per_image"] = total_j / total_images
        metrics["energy/images_per_joule"] = total_images / total_j
    return metrics


def _finite(values):
    return [v for v in values if not math.isnan(v)]


def telemetry_metrics(per_gpu: Dict[int, Sequence[Sample]]) -> Dict[str, float]:
    """gpu{i}/<field> (mean) and gpu{i}/<field>_max for each GPU, plus gpu/<field> over all GPUs."""
    metrics: Dict[str, float] = {}
    for i, samples in sorted(per_gpu.items()):
        for col, name in enumerate(FIELDS, start=1):
            values = _finite(s[col] for s in samples if col < len(s))  # samples read before a field existed
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
        count = library().nvmlDeviceGetCount()
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


def has_nvlink(handle) -> Optional[bool]:
    """Whether the GPU has an active NVLink (where NCCL's P2P transport then goes); None where NVML
    cannot say."""
    nvml = library()
    try:
        links = nvml.NVML_NVLINK_MAX_LINKS
        for link in range(links):
            try:
                if nvml.nvmlDeviceGetNvLinkState(handle, link) == nvml.NVML_FEATURE_ENABLED:
                    return True
            except nvml.NVMLError:  # a link index the GPU does not have
                continue
        return False
    except Exception:  # no NVML: the transport says P2P alone
        return None


def process_pids(handle) -> List[int]:
    """The pids of the processes NVML sees on the GPU (compute and graphics); [] where it cannot say."""
    nvml = library()
    found = []
    for query in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
        try:
            found += [p.pid for p in getattr(nvml, query)(handle)]
        except Exception:  # an NVML without the query, or a GPU that does not answer it
            continue
    return found
