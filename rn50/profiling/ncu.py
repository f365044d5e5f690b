"""profiler=ncu: Nsight Compute over a few steps after the measured windows.

The one rank runs under `ncu --profile-from-start off`; NcuRange (rn50/profiling/ncu_range.py) calls cudaProfilerStart
and cudaProfilerStop around the profiled steps, so only their kernels are replayed and
measured. After the process exits, the launching process exports the report's raw page
as CSV and averages each pipe-utilization metric over the kernels, weighted by each
kernel's duration: the share of the profiled GPU time each pipe was busy.
"""

import csv
import logging
import math
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple

from omegaconf import DictConfig

from rn50 import wire
from rn50.config.schema import Accelerator
from rn50.config.reads import dist_name, world_size
from rn50.errors import ConfigError, RunFailed

log = logging.getLogger(__name__)

DURATION = "gpu__time_duration.sum"
REPORT, LOG, CSV = "ncu.ncu-rep", "ncu.log", "ncu_kernels.csv"  # in the run's output directory
TO_MS = {"ns": 1e-6, "nsecond": 1e-6, "us": 1e-3, "usecond": 1e-3, "ms": 1.0, "msecond": 1.0,
         "s": 1e3, "second": 1e3}
PERMISSION_FIX = (
    "ncu cannot read the GPU performance counters (ERR_NVGPUCTRPERM): they need root, or the "
    "NVIDIA driver loaded with NVreg_RestrictProfilingToAdminUsers=0; "
    "see https://developer.nvidia.com/ERR_NVGPUCTRPERM"
)


def preflight(cfg: DictConfig, started_elsewhere: bool = False) -> None:
    """ncu must be installed, and the run must be one process on a GPU that rn50 starts (not
    started_elsewhere, by another cluster's starter); ConfigError otherwise."""
    # What no install fixes comes first: a host without a GPU hears that, not to install ncu.
    if started_elsewhere:  # another starter's processes: ncu must start its own
        raise ConfigError(
            f"cluster={cfg.cluster.name}: profiler=ncu starts its one process under ncu itself; "
            "use cluster=local (the default) on a GPU host"
        )
    if world_size(cfg) != 1:
        raise ConfigError(
            f"dist={dist_name(cfg)}: profiler=ncu profiles one process (its kernel replay "
            "serializes kernels and would deadlock the collectives of several); use dist=1n1g"
        )
    if cfg.dist.accelerator != Accelerator.gpu:
        raise ConfigError(
            f"dist.accelerator={cfg.dist.accelerator.value}: profiler=ncu profiles GPU kernels "
            "and needs a GPU; use dist.accelerator=gpu on a host with one"
        )
    exe = cfg.profiler.executable
    if shutil.which(exe) is None:
        raise ConfigError(
            f"profiler=ncu needs Nsight Compute's ncu, not found as {exe!r}"
            f"{' on PATH' if '/' not in exe else ''}; install Nsight Compute or set "
            "profiler.executable=/path/to/ncu"
        )


def run(cfg: DictConfig, config_yaml: str, out: Path) -> list:
    """The one rank, in a process Nsight Compute starts; its ncu/ metrics and files join rank 0's."""
    try:
        ranks = wire.run_once(command(cfg, out), wire.Task(config_yaml, str(out)))
    except RunFailed:
        check_log(out / LOG)  # ncu's own error names the cause better than an exit status
        raise
    metrics, files = collect(cfg, out)
    ranks[0].metrics.update(metrics)
    ranks[0].files += files
    return ranks


def _metric_list(cfg: DictConfig) -> str:
    return ",".join([DURATION, *cfg.profiler.metrics.values()])


def command(cfg: DictConfig, out: Path) -> List[str]:
    """The prefix that starts a process under ncu, collecting only between cudaProfilerStart/Stop."""
    return [
        shutil.which(cfg.profiler.executable),
        "--profile-from-start", "off",
        "--clock-control", "none",  # the clocks the benchmark runs at, not ncu's base clocks
        "--target-processes", "all",
        "--metrics", _metric_list(cfg),
        "--export", str(out / REPORT.removesuffix(".ncu-rep")),
        "--force-overwrite",
        "--log-file", str(out / LOG),
    ]


def log_error(text: str) -> Optional[str]:
    """The one-line cause of an ncu failure found in its log, or None."""
    if "ERR_NVGPUCTRPERM" in text:
        return PERMISSION_FIX
    # A failing worker makes ncu log "The application returned an error code"; the worker's
    # own error says more, so only ncu's own errors count here.
    errors = [line.strip() for line in text.splitlines()
              if line.startswith("==ERROR==") and "returned an error code" not in line]
    if errors:
        return f"ncu failed: {errors[0].removeprefix('==ERROR==').strip()} (see {LOG})"
    return None


def check_log(path: Path) -> None:
    """RunFailed(kind=profiler) when ncu's log holds an error."""
    message = log_error(path.read_text(errors="replace")) if path.exists() else None
    if message:
        raise RunFailed(message, kind="profiler")


def collect(cfg: DictConfig, out: Path) -> Tuple[Dict[str, float], List[str]]:
    """Export the report's raw page as CSV and aggregate it; RunFailed(kind=profiler) if ncu failed."""
    check_log(out / LOG)
    report, table = out / REPORT, out / CSV
    if not report.exists():
        raise RunFailed(f"ncu wrote no report {report}; see {out / LOG}", kind="profiler")
    with open(table, "w") as f:
        done = subprocess.run(
            [shutil.which(cfg.profiler.executable), "--import", str(report), "--csv", "--page", "raw",
             "--print-units", "base", "--metrics", _metric_list(cfg)],
            stdout=f, stderr=subprocess.PIPE, text=True,
        )
    if done.returncode != 0:
        first = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[0]
        raise RunFailed(f"ncu --import {report} failed: {first}", kind="profiler")
    metrics = aggregate(table, cfg.profiler.metrics)
    if not metrics["ncu/kernels"]:
        raise RunFailed(f"ncu profiled no kernels in the profiled steps; see {out / LOG}", kind="profiler")
    return metrics, [str(table), str(out / LOG), str(report)]


def _number(text: str) -> float:
    """ncu's numbers carry thousands separators ("2,752"); n/a and blanks are NaN."""
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return math.nan


def aggregate(path: Path, metrics: Mapping[str, str]) -> Dict[str, float]:
    """ncu/kernels, ncu/profiled_gpu_ms, and ncu/<name>: each metric's duration-weighted mean.

    The CSV (`ncu --import R --csv --page raw`) has a header row, a units row, then one
    row per profiled kernel. A metric that is not a column (another GPU generation names
    it differently) is left out with a warning.
    """
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    start = next((i for i, row in enumerate(rows) if row[:1] == ["ID"]), None)
    if start is None:
        raise RunFailed(f"{path} is not an ncu raw-page CSV: no header row", kind="profiler")
    header, units, kernels = rows[start], rows[start + 1], [r for r in rows[start + 2:] if r]
    column = {name: i for i, name in enumerate(header)}
    if DURATION not in column:
        raise RunFailed(f"{path} has no {DURATION} column", kind="profiler")
    d = column[DURATION]
    to_ms = TO_MS.get(units[d])
    if to_ms is None:
        raise RunFailed(f"{path}: unknown unit {units[d]!r} of {DURATION}", kind="profiler")
    durations = [_number(r[d]) for r in kernels]
    result = {"ncu/kernels": float(len(kernels)), "ncu/profiled_gpu_ms": sum(durations) * to_ms}
    for name, metric in metrics.items():
        if metric not in column:
            log.warning("ncu reported no %s, so there is no ncu/%s", metric, name)
            continue
        pairs = [(_number(r[column[metric]]), dur) for r, dur in zip(kernels, durations)]
        pairs = [(value, dur) for value, dur in pairs if not math.isnan(value) and not math.isnan(dur)]
        weight = sum(dur for _, dur in pairs)
        if weight > 0:
            result[f"ncu/{name}"] = sum(value * dur for value, dur in pairs) / weight
    return result
