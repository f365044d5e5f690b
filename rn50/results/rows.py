"""A sweep's rows, from MLflow alone: one per run (its config as a setup string, its figures, the proof
that it trained, its status and failure), a row for each point that never started, and what each point
of several devices shows against its 1-device reference (speedup, scaling efficiency, the step time
beyond it and the share of the all-reduce hidden). rn50/results/report.py makes the table and files."""

import json
import math
import statistics
from collections import defaultdict
from typing import Callable, Dict, List, Optional, Tuple

from rn50 import tracking
from rn50.errors import Rn50Error
from rn50.measure import timing
from rn50.point.identity import NOT_REPORT_SETUP, current_params, leaves_out, reads_dali_keys, sweep_points

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


def reference_medians(rows: List[Dict], key: Callable[[Dict], tuple],
                      is_reference: Callable[[Dict], bool]) -> Dict[tuple, float]:
    """By key, the median images/sec of the rows that can stand as a reference (is_reference): finished,
    with a figure, and not profiled (a profiler's steps are not the figure's)."""
    found: Dict[tuple, List[float]] = defaultdict(list)
    for r in rows:
        if is_reference(r) and r["status"] == "FINISHED" and r["images_per_sec_median"] and not r["profiled"]:
            found[key(r)].append(r["images_per_sec_median"])
    return {k: statistics.median(v) for k, v in found.items()}


def add_scaling(rows: List[Dict]) -> List[Dict]:
    def key(r):  # a CPU run is no reference for a GPU run of the same config
        return r["setup"], r.get("accelerator")

    base = reference_medians(rows, key, lambda r: r["gpus"] == 1)
    for r in rows:
        ref = base.get(key(r))
        ok = r["status"] == "FINISHED" and r["images_per_sec_median"] and ref
        r["speedup"] = r["images_per_sec_median"] / ref if ok else None
        r["scaling_efficiency_pct"] = 100.0 * r["speedup"] / r["gpus"] if ok else None
        r["comm_exposed_ms"] = r["comm_hidden_pct"] = None
        if ok and r["gpus"] > 1 and r.get("batch_per_gpu"):
            r["comm_exposed_ms"], r["comm_hidden_pct"] = exposed(r, ref)
        if r["status"] != "FINISHED":
            r["status"] = f"{r['status']} ({r['failure']})" if r["failure"] else r["status"]
    return rows


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


def exposed(row: Dict, ref_images_per_sec: float) -> Tuple[float, Optional[float]]:
    """(ms, %): what a step of several devices took beyond its 1-device reference's step (the
    communication no compute hid, and DDP's own work), never below 0 (noise); and the share of the
    timed all-reduce hidden behind compute, where the run timed one."""
    step_ms = 1e3 * row["batch_per_gpu"] * row["gpus"] / row["images_per_sec_median"]
    ref_ms = 1e3 * row["batch_per_gpu"] / ref_images_per_sec
    extra = max(0.0, step_ms - ref_ms)
    allreduce = row.get("allreduce_ms")
    hidden = 100.0 * min(1.0, max(0.0, 1 - extra / allreduce)) if allreduce else None
    return extra, hidden


def scaling_metrics(rows: List[Dict]) -> Dict[str, Dict[str, float]]:
    """What a sweep found of each point against its 1-device reference, as the point's metrics:
    scaling/speedup, scaling/efficiency_pct, comm/exposed_ms_per_step and comm/hidden_pct."""
    found = {}
    for r in rows:
        if r.get("speedup") is None or (r["gpus"] or 0) < 2:
            continue
        metrics = {"scaling/speedup": r["speedup"], "scaling/efficiency_pct": r["scaling_efficiency_pct"],
                   "comm/exposed_ms_per_step": r["comm_exposed_ms"]}
        if r.get("comm_hidden_pct") is not None:
            metrics["comm/hidden_pct"] = r["comm_hidden_pct"]
        found[r["run_id"]] = metrics
    return found


def scaling_lines(rows: List[Dict]) -> List[str]:
    """A sentence per finished point of several devices: '4 GPUs: 94.2% scaling; all-reduce 1.9 ms at
    210 GB/s over P2P/NVLink, 0.4 ms of it exposed per step (79% hidden)'."""
    lines = []
    for r in rows:
        if (r["gpus"] or 0) < 2 or r.get("scaling_efficiency_pct") is None:
            continue
        one, many = DEVICE_NAMES[r.get("accelerator", "cuda")]
        text = (f"{r['model']} {r['precision']} bs{r['batch_per_gpu']}, {r['gpus']} {many}: "
                f"{r['scaling_efficiency_pct']:.1f}% scaling")
        if r.get("allreduce_ms"):
            over = f" over {r['transport']}" if r.get("transport") else ""
            text += f"; all-reduce {rounded(r['allreduce_ms'])} ms at {rounded(r['busbw_GBps'])} GB/s{over}, "
            if r["comm_exposed_ms"] <= r["allreduce_ms"]:
                text += (f"{rounded(r['comm_exposed_ms'])} ms of it exposed per step "
                         f"({r['comm_hidden_pct']:.0f}% hidden)")
            else:  # the step grew by more than the all-reduce takes alone
                text += (f"and a step takes {rounded(r['comm_exposed_ms'])} ms more than on 1 {one}: more than the "
                         "all-reduce alone, so DDP's own work (bucket copies, kernels beside the collective) shows too")
        else:
            text += f"; {rounded(r['comm_exposed_ms'])} ms per step beyond 1 {one}'s (no all-reduce timed)"
        lines.append(text)
    return lines


def collect(uri: str, parent_run_id: Optional[str] = None, experiment: Optional[str] = None,
            filter_string: str = "") -> List[Dict]:
    """One row per benchmark run: the children of a sweep, or an experiment's runs."""
    try:
        return _collect(tracking.client.open_client(uri), uri, parent_run_id, experiment, filter_string)
    except tracking.client.MlflowException as exc:
        which = f"--parent-run-id {parent_run_id}" if parent_run_id else f"--filter {filter_string!r}"
        raise Rn50Error(f"{which}: {str(exc).splitlines()[0]}") from None


def _collect(client, uri, parent_run_id, experiment, filter_string) -> List[Dict]:
    filter_string_given = bool(filter_string)  # the points a filter leaves out are not "not started"
    if parent_run_id:
        exp_ids = [client.get_run(parent_run_id).info.experiment_id]
        clause = f"tags.`{tracking.runs.PARENT_TAG}` = '{parent_run_id}'"
        filter_string = f"{clause} and {filter_string}" if filter_string else clause
    else:
        found = client.get_experiment_by_name(experiment or "rn50")
        if found is None:
            raise Rn50Error(f"no MLflow experiment named {experiment!r} in {uri}")
        exp_ids = [found.experiment_id]
    runs = tracking.runs.search_runs(client, exp_ids, filter_string)
    children = [r for r in runs if r.data.tags.get(ROLE_TAG) != "sweep"]
    rows = [row(r) for r in children]
    for r in rows:
        if r["training"]:
            r["top1_curve"] = top1_curve(client, r["run_id"])
    if parent_run_id:
        rows = latest_per_point(rows)
    rows.sort(key=lambda r: (r["model"], r["precision"] or "", r["batch_per_gpu"], r["gpus"], r["start_time"]))
    rows = add_vs_synthetic(add_scaling(rows))
    if parent_run_id and not filter_string_given:  # the sweep's points that have no run, in its order
        kinds = {r["accelerator"] for r in rows}
        rows += not_started(client.get_run(parent_run_id).data.tags, children, kinds.pop() if len(kinds) == 1 else "cuda")
    return rows


NOT_STARTED = "NOT STARTED"


def not_started(sweep_tags: Dict[str, str], children: list, accelerator: str) -> List[Dict]:
    """A row for each job of the sweep (its `sweep.override_list` tag, or `sweep.overrides` of a sweep
    logged before it) that no child run was made for (a sweep stopped before it, its launcher gone),
    named in its model cell by the keys the sweep varies; no figures. None where the overrides do not
    parse again."""
    listed = sweep_tags.get("sweep.override_list")
    overrides = json.loads(listed) if listed else sweep_tags.get("sweep.overrides", "").split()
    try:
        jobs = sweep_points(overrides) if overrides else []
    except Exception:  # Hydra's OverrideParseException: a value it cannot read back
        return []
    # A run is a job's when its command holds all of the job's overrides: a resumed sweep's jobs add
    # sweep.resume, a SLURM sweep's add mlflow.run_id.
    made = [f" {r.data.tags.get('command', '')} " for r in children]
    varied = [i for i in range(len(jobs[0]) if jobs else 0) if len({job[i] for job in jobs}) > 1]
    rows = []
    for job in jobs:
        if any(all(f" {o} " in command for o in job) for command in made):
            continue
        name = " ".join(job[i] for i in varied) or " ".join(job)
        rows.append({**{k: None for k, _ in COLUMNS}, "model": f"not started: {name}", "point": " ".join(job),
                     "status": NOT_STARTED, "failure": "", "error": "", "run_id": "", "accelerator": accelerator,
                     "profiled": False, "training": False, "start_time": 0})
    return rows


def tally(rows: List[Dict]) -> str:
    """'3 points: 1 finished, 1 failed, 1 not started': the sweep's Description and its parent's tag."""
    done = sum(r["status"] == "FINISHED" for r in rows)
    missing = sum(r["status"] == NOT_STARTED for r in rows)
    failed = len(rows) - done - missing
    parts = [f"{done} finished"] + [f"{failed} failed"] * bool(failed) + [f"{missing} not started"] * bool(missing)
    return f"{len(rows)} point{'s' * (len(rows) != 1)}: {', '.join(parts)}"


def top1_curve(client, run_id: str) -> List[Tuple[float, float]]:
    """(training seconds so far, val top-1 %) at each evaluated epoch of a train=accuracy run."""
    elapsed = {m.step: m.value for m in client.get_metric_history(run_id, "time/elapsed_s")}
    return sorted((elapsed[m.step], 100 * m.value) for m in client.get_metric_history(run_id, "val/top1")
                  if m.step in elapsed)


def latest_per_point(rows: List[Dict]) -> List[Dict]:
    """In a sweep, a point run again (resuming re-runs failed points) is its latest run."""
    latest: Dict[str, Dict] = {}
    for r in rows:
        if r["config_hash"] and (r["config_hash"] not in latest
                                 or r["start_time"] > latest[r["config_hash"]]["start_time"]):
            latest[r["config_hash"]] = r
    return [r for r in rows if not r["config_hash"] or latest[r["config_hash"]] is r]


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
