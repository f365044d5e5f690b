"""A sweep's rows: one per MLflow run (its config as a setup string, its figures, the proof that it
trained, its status and failure), the table's columns, and each real-data point against the synthetic
point of its settings. rn50/results/collect.py reads the runs, rn50/results/scaling.py sets each point of
several devices against its 1-device reference, rn50/results/report.py makes the table and files."""

import math
import statistics
from collections import defaultdict
from typing import Callable, Dict, List

from rn50 import tracking
from rn50.measure import comm, timing
from rn50.point.identity import NOT_REPORT_SETUP, current_params, leaves_out, reads_dali_keys

ROLE_TAG = tracking.runs.ROLE_TAG


# The MFU peak table is the same data in every run; mfu.peak_tflops (an override) stays.
PEAK_TABLE = "mfu.peaks."


# What the processes of a run are, by its accelerator: (one, many).
DEVICE_NAMES = {"cuda": ("GPU", "GPUs"), "cpu": ("process", "CPU processes")}

# Column keys stay as they are (CSV and JSON readers use them); headers name the device kind.
COMM_COLUMNS = ("allreduce_ms", "busbw_GBps", "comm_exposed_ms", "comm_hidden_pct", "transport")

COLUMNS = [
    ("model", "model"), ("nodes", "nodes"), ("gpus", "{devices}"), ("precision", "precision"),
    ("batch_per_gpu", "batch per {device}"),
    ("images_per_sec_median", "images/sec median"), ("images_per_sec_mean", "images/sec mean"),
    ("speedup", "speedup"), ("scaling_efficiency_pct", "scaling eff. %"),
    # Communication (rn50/measure/comm.py): the gradients' all-reduce timed alone, and how much of it a
    # step showed: its step time less its 1-device reference's (add_scaling).
    ("allreduce_ms", "all-reduce ms"), ("busbw_GBps", "bus GB/s"), ("comm_exposed_ms", "exposed ms/step"),
    ("comm_hidden_pct", "hidden %"), ("transport", "transport"),
    # The slowest device's SM clock over the windows against its 1-device reference's (add_scaling): a
    # power-capped GPU clocks lower under DDP, and DDP waits for the slowest rank. Shown where any point has one.
    ("slowest_clock_pct", "slowest {device} clock %"),
    ("gpu_utilization_pct", "GPU util %"), ("data_wait_pct", "data wait %"),
    # Steps that waited for their batches over timing.INPUT_BOUND_WAIT_PCT of the windows: shown where any point did.
    ("input_bound", "input-bound"),
    # A real-data point's images/sec over the synthetic point of its settings (add_vs_synthetic): what its
    # input pipeline cost, a wait or not. Shown where any point has one.
    ("vs_synthetic", "x synthetic"),
    # The cores each rank's processes kept busy over the windows (DataLoader workers and DALI's threads
    # included): what a node's CPUs must give each device; and how busy the busiest host's CPUs were.
    ("cpu_cores_per_device", "CPU cores per {device}"), ("host_busy_cores", "host busy cores"),
    ("mfu_pct", "MFU %"),
    ("images_per_joule", "images/J"), ("joules_per_image", "J/image"),
    # The proof that the run trained (rn50/measure/trained.py): a figure counts only if it did.
    ("loss_first", "loss first"), ("loss_last", "loss last"), ("loss_fell", "loss fell"),
    ("skipped_in_window", "skipped in window"),
    ("startup_s", "startup s"), ("wall_s", "wall s"),
    # What else ran beside the windows (rn50/measure/host.py): shown where any point had company.
    ("contended", "contended"), ("status", "status"),
]

CSV_EXTRA = ["failure", "error", "point", "run_id", "data", "image_size", "accelerator", "contention"]

# train=accuracy runs (the `train.name` param): their columns, before status, when a report has any.
ACCURACY_COLUMNS = [("best_top1_pct", "best top-1 %"), ("time_to_target_s", "time to target s"),
                    ("train_s", "train s"), ("epochs", "epochs")]


def setup(params: Dict[str, str], leave_out=NOT_REPORT_SETUP) -> str:
    """The config that makes a figure, as one string: every param but those under `leave_out` (by default the
    keys that may differ between a point and its 1n1g reference; the device kind keeps CPU and GPU runs apart in
    add_scaling), and
    data.dali's where the pipeline ignores them (experiment=fastest sets some). A _target_ logged
    before issue 28 moved the options' classes reads as today's, so those runs match new ones."""
    params = current_params(params)
    if not reads_dali_keys(params.get("data._target_"), params.get("data.name")):
        leave_out = (*leave_out, "data.dali.")
    return ";".join(f"{k}={v}" for k, v in sorted(params.items())
                    if not leaves_out(k, leave_out) and not k.startswith(PEAK_TABLE))


def accelerator(run) -> str:
    """cuda or cpu: the tag a finished run has, else what its config asked for."""
    tag = run.data.tags.get("accelerator")
    if tag:
        return tag
    return "cpu" if run.data.params.get("dist.accelerator") == "cpu" else "cuda"


def has_throughput(run) -> bool:
    """Under ncu every kernel launch of the measured window is intercepted too (docs/profiling.md),
    so an ncu run's images/sec is no benchmark figure."""
    return run.data.params.get("profiler.name") != "ncu"


def row(run) -> Dict:
    p, m, t = run.data.params, run.data.metrics, run.data.tags
    nodes, per_node = int(p.get("dist.nodes", 1)), int(p.get("dist.gpus_per_node", 1))
    status = run.info.status
    failure = t.get("failure", "")
    model = p.get("model.arch", "?") + (" compiled" if p.get("model.compile") == "True" else "")
    model += " on CPU" if accelerator(run) == "cpu" else ""  # in each row and each plot's legend
    comparable = has_throughput(run)
    return {
        "run_id": run.info.run_id,
        "point": t.get("mlflow.runName", run.info.run_id),
        "setup": setup(p),
        # add_vs_synthetic's: no pipeline keys, nor the class count the data's folders set (0.1% of the FLOPs)
        "input_setup": setup(p, leave_out=(*NOT_REPORT_SETUP, "data.", "model.num_classes")),
        "model": model, "image_size": p.get("data.image_size"), "data": p.get("data.name"),
        "nodes": nodes, "gpus": nodes * per_node, "precision": p.get("precision.name"),
        "batch_per_gpu": batch_per_gpu(p, m),
        "images_per_sec_median": m.get("throughput/images_per_sec") if comparable else None,
        "images_per_sec_mean": m.get("throughput/images_per_sec_mean") if comparable else None,
        "allreduce_ms": m.get("comm/allreduce_ms"), "busbw_GBps": m.get("comm/busbw_GBps"),
        "transport": t.get("comm_transport"),
        # the same all-reduce before the first step, and whether the network moved under the point by then
        "allreduce_before_ms": m.get("comm/allreduce_before_ms"),
        "network_changed": comm.network_changed(m),
        # NVML's over the windows: the devices' mean, and the slowest device's (the mean where one device ran)
        "sm_clock_mhz": m.get("gpu/sm_clock_mhz"), "sm_clock_mhz_min": m.get("gpu/sm_clock_mhz_min"),
        "gpu_utilization_pct": m.get("gpu/utilization_pct"), "data_wait_pct": m.get("data/wait_pct"),
        # from the metrics, not the tag: runs recorded before the tag (or its GPU condition) say it too
        "input_bound": ("yes" if timing.input_bound(m) else "no") if "data/wait_pct" in m else None,
        "cpu_cores_per_device": m.get("cpu/cores_per_device"), "host_busy_cores": m.get("host/busy_cores"),
        "mfu_pct": m.get("mfu_pct") if comparable else None,
        # GPU board energy over the measured windows (NVML), not the node's at the wall.
        "images_per_joule": m.get("energy/images_per_joule") if comparable else None,
        "joules_per_image": m.get("energy/joules_per_image") if comparable else None,
        "loss_first": m.get("train/loss_first"), "loss_last": m.get("train/loss_last"),
        # a point whose loss did not fall across its window is flagged here, not only in its log
        "loss_fell": {1.0: "yes", 0.0: "no"}.get(m.get("train/loss_fell")),
        "skipped_in_window": int(m["train/skipped_steps_window"]) if "train/skipped_steps_window" in m else None,
        "startup_s": m.get("time/startup_s"), "wall_s": m.get("time/wall_s"),
        # a point that did not train has its warm-up but no window
        "busy_s": (m["time/warmup_s"] + m.get("window/seconds_total", 0.0)) if "time/warmup_s" in m else None,
        "contended": {"true": "yes", "false": "no"}.get(t.get("contended")), "contention": t.get("contention", ""),
        "status": status, "failure": failure,
        "error": t.get("error", ""),
        "profiled": p.get("profiler.name", "none") != "none",
        "accelerator": accelerator(run),
        "start_time": run.info.start_time,
        "config_hash": t.get(tracking.runs.HASH_TAG),
        "training": p.get("train.name") == "accuracy",
        "best_top1_pct": 100 * m["val/best_top1"] if "val/best_top1" in m else None,
        "time_to_target_s": m.get("time/to_target_s"), "train_s": m.get("time/train_s"),
        "epochs": int(m["train/epochs"]) if "train/epochs" in m else None,
    }


def batch_per_gpu(params: Dict, metrics: Dict) -> int:
    """The batch a run trained at: the one data.batch_size=auto chose, else the one asked for;
    0 for an auto run that stopped before choosing."""
    if "data.batch_size_chosen" in metrics:
        return int(metrics["data.batch_size_chosen"])
    asked = params.get("data.batch_size", "0")
    return int(asked) if asked.isdigit() else 0


def reference_medians(rows: List[Dict], key: Callable[[Dict], tuple], is_reference: Callable[[Dict], bool],
                      value: str = "images_per_sec_median") -> Dict[tuple, float]:
    """By key, the median `value` (images/sec unless named) of the rows that can stand as a reference
    (is_reference): finished, with a figure, and not profiled (a profiler's steps are not the figure's)."""
    found: Dict[tuple, List[float]] = defaultdict(list)
    for r in rows:
        if (is_reference(r) and r["status"] == "FINISHED" and r["images_per_sec_median"] and not r["profiled"]
                and r.get(value) is not None):
            found[key(r)].append(r[value])
    return {k: statistics.median(v) for k, v in found.items()}


def add_vs_synthetic(rows: List[Dict]) -> List[Dict]:
    """vs_synthetic of each finished real-data point: its images/sec over the median of the synthetic
    points with its settings but the pipeline's keys (data.*) and class count, on as many devices of the
    same kind, at its batch and image size (reference_medians). A pipeline can cost steps without making
    them wait (DALI decodes on the training GPU and the rank's CPUs), which data wait alone does not show."""
    def key(r):
        return r.get("input_setup"), r.get("accelerator"), r["nodes"], r["gpus"], r["batch_per_gpu"], r.get("image_size")

    synthetic = reference_medians(rows, key, lambda r: r.get("data") == "synthetic")
    for r in rows:
        ref = synthetic.get(key(r)) if r.get("data") not in (None, "synthetic") else None
        ok = ref and r["status"] == "FINISHED" and r["images_per_sec_median"]
        r["vs_synthetic"] = r["images_per_sec_median"] / ref if ok else None
    return rows


NOT_STARTED = "NOT STARTED"


def tally(rows: List[Dict]) -> str:
    """'3 points: 1 finished, 1 failed, 1 not started': the sweep's Description and its parent's tag."""
    done = sum(r["status"] == "FINISHED" for r in rows)
    missing = sum(r["status"] == NOT_STARTED for r in rows)
    failed = len(rows) - done - missing
    parts = [f"{done} finished"] + [f"{failed} failed"] * bool(failed) + [f"{missing} not started"] * bool(missing)
    return f"{len(rows)} point{'s' * (len(rows) != 1)}: {', '.join(parts)}"


def rounded(value) -> str:
    """A figure with about four significant digits, never in exponent form: 2844, 123.4, 1.21."""
    if value is None:
        return "-"
    if not isinstance(value, float):
        return str(value)
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    decimals = max(0, min(2, 3 - math.floor(math.log10(abs(value)))))
    return f"{value:.{decimals}f}"
