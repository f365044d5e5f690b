"""Sweep reports, built from MLflow alone (rows from rn50/results/rows.py): a table like the published ones,
CSV, JSON, plots.

    python -m rn50.report --parent-run-id ID
    python -m rn50.report --experiment rn50 --filter "tags.gpu_model = 'NVIDIA H200'"

Speedup is against the median images/sec of the finished, unprofiled 1n1g runs
whose config is the same but for dist, profiler, telemetry, cluster and mlflow
keys; scaling efficiency is speedup over the device count. Devices are named for what
ran: GPUs, or CPU processes for dist.accelerator=cpu, whose rows say "on CPU" after the model.
"""

import argparse
import csv
import json
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from rn50.config.messages import reported
from rn50.config.reads import nodes_gpus
from rn50 import tracking
from rn50.errors import Rn50Error
from rn50.results.collect import collect
from rn50.results.rows import ACCURACY_COLUMNS, COLUMNS, COMM_COLUMNS, CSV_EXTRA, DEVICE_NAMES, rounded, tally
from rn50.results.scaling import scaling_lines


def device_names(rows: List[Dict]) -> Tuple[str, str]:
    """(one, many) for the devices of these rows: GPU(s), CPU process(es), or device(s) when mixed."""
    kinds = {r.get("accelerator", "cuda") for r in rows}
    return DEVICE_NAMES[kinds.pop()] if len(kinds) == 1 else ("device", "devices (GPUs or CPU processes)")


# Columns that only some runs have (real data beside synthetic; runs recorded before a metric existed):
# shown where any row has one.
WHERE_RECORDED = ("slowest_clock_pct", "vs_synthetic", "cpu_cores_per_device", "host_busy_cores")


def columns(rows: List[Dict]) -> List[Tuple[str, str]]:
    """(key, header) of the table: device columns named for what ran; GPU util only where GPUs ran."""
    one, many = device_names(rows)
    gpus = any(r.get("accelerator", "cuda") == "cuda" for r in rows)
    several = any((r["gpus"] or 0) > 1 for r in rows)  # communication: columns where a point had some
    company = any(r.get("contended") == "yes" for r in rows)
    starved = any(r.get("input_bound") == "yes" for r in rows)
    recorded = {k for k in WHERE_RECORDED if any(r.get(k) is not None for r in rows)}
    cols = [(k, h.format(device=one, devices=many)) for k, h in COLUMNS
            if (k != "gpu_utilization_pct" or gpus) and (k not in COMM_COLUMNS or several)
            and (k != "contended" or company) and (k != "input_bound" or starved)
            and (k not in WHERE_RECORDED or k in recorded)]
    if any(r.get("training") for r in rows):
        cols[-1:-1] = ACCURACY_COLUMNS
    return cols


def _table(rows: List[Dict], cols: List[Tuple[str, str]]) -> List[str]:
    """Markdown lines: header, rule, one line per row."""
    lines = ["| " + " | ".join(h for _, h in cols) + " |", "|" + " --- |" * len(cols)]
    return lines + ["| " + " | ".join(cell(k, r.get(k)) for k, _ in cols) + " |" for r in rows]


def cell(key: str, value) -> str:
    """A table cell: losses to three significant digits (a learned batch's is 0.0017), the rest rounded()."""
    if key.startswith("loss_") and isinstance(value, float):
        return f"{value:.3g}"
    return rounded(value)


def markdown(rows: List[Dict]) -> str:
    """The table, then a sentence per point of several devices on its scaling and communication."""
    text = "\n".join(_table(rows, columns(rows))) + "\n"
    lines = scaling_lines(rows)
    return text + ("\n" + "\n".join(f"- {line}" for line in lines) + "\n" if lines else "")


def description(rows: List[Dict], limit: int = 8000) -> str:
    """Markdown for a sweep parent's Description: the report table without its empty columns,
    cut to `limit` characters (MLflow's tag limit) at a row boundary, saying how many rows are left out."""
    text = f"**{tally(rows)}.** Plots, CSV and JSON are this run's artifacts.\n\n"
    cols = [(k, h) for k, h in columns(rows) if any(r.get(k) is not None for r in rows)]
    lines = _table(rows, cols)
    text += lines[0] + "\n" + lines[1] + "\n"
    for i, line in enumerate(lines[2:]):
        note = f"\n{len(rows) - i} more rows in sweep_report.md (artifacts).\n"
        if len(text) + len(line) + 1 + len(note) > limit:
            return text + note
        text += line + "\n"
    return text


def time_line(rows: List[Dict], sweep_wall_s: float, since_ms: int = 0) -> str:
    """Where a sweep's time went: its wall time against the warm-up and measured steps of the
    points it ran (since since_ms: a resumed sweep's earlier points ran in another command)."""
    busy = sum(r["busy_s"] for r in rows if r.get("busy_s") and r["start_time"] >= since_ms)
    share = f" ({sweep_wall_s / busy:.2f}x)" if busy else ""
    return (f"sweep wall time {sweep_wall_s:.1f} s; warm-up plus measured steps {busy:.1f} s{share}, "
            "the rest is process start-up, logging and shutdown")


def charts():
    """matplotlib's names for rn50's charts (rn50/results/charts.py), imported when one is drawn."""
    from rn50.results import charts  # deferred: matplotlib's import takes a second, which a launcher never pays

    return charts


def _line_plot(path: Path, lines: Dict[str, list], ideal_to: Optional[int] = None, **axes) -> Path:
    """One line per label through its (x, y) points, saved as a PNG."""
    fig = charts().Figure(figsize=(6, 4))
    ax = fig.subplots()
    if ideal_to:
        ax.plot([1, ideal_to], [1, ideal_to], "k--", label="ideal")
    for label, points in sorted(lines.items()):
        xs, ys = zip(*sorted(points))
        ax.plot(xs, ys, marker="o", label=label)
    ticks = axes.pop("xticks", None)
    ax.set(**axes)
    if ticks:  # the values themselves, not 2x10^0 on a log axis
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.xaxis.set_minor_locator(charts().NullLocator())
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return path


def _plot(rows: List[Dict], out: Path) -> List[Path]:
    """throughput_vs_batch.png, speedup_vs_gpus.png when the sweep has more than one device count, and
    top1_vs_time.png when it has train=accuracy runs."""
    done = [r for r in rows if r["status"] == "FINISHED" and r["images_per_sec_median"]]
    one, many = device_names(done or rows)
    by_batch, by_gpus = defaultdict(list), defaultdict(list)
    for r in done:
        by_batch[f"{r['model']} {r['precision']} {nodes_gpus(r['nodes'], r['gpus'] // r['nodes'])}"].append(
            (r["batch_per_gpu"], r["images_per_sec_median"]))
        if r["speedup"] is not None:
            by_gpus[f"{r['model']} {r['precision']} bs{r['batch_per_gpu']}"].append((r["gpus"], r["speedup"]))
    batches = sorted({r["batch_per_gpu"] for r in done})
    curves = {f"{r['point']} {r['run_id'][:8]} ({r['status']})": r["top1_curve"] for r in rows if r.get("top1_curve")}
    plots = []
    if done or not curves:  # a report of train=accuracy runs alone has no throughput to plot
        plots.append(_line_plot(out / "throughput_vs_batch.png", by_batch, xscale="log", xticks=batches,
                                xlabel=f"batch size per {one}", ylabel="images/sec",
                                title="Throughput against batch size"))
    if curves:  # train=accuracy runs: one line per run
        plots.append(_line_plot(out / "top1_vs_time.png", curves, xlabel="training time (s)",
                                ylabel="validation top-1 %", title="Time to accuracy"))
    device_counts = sorted({r["gpus"] for r in done})
    if len(device_counts) > 1:  # one count would be a single dot on the ideal line
        plots.append(_line_plot(out / "speedup_vs_gpus.png", by_gpus, ideal_to=device_counts[-1],
                                xticks=device_counts, xlabel=many,
                                ylabel=f"speedup over 1 {one}", title="Scaling"))
    return plots


def write(rows: List[Dict], out: Path, footer: str = "") -> List[Path]:
    """sweep_report.md/.csv/.json and the plots in `out`; the Markdown file first."""
    out.mkdir(parents=True, exist_ok=True)
    md, csv_path, js = out / "sweep_report.md", out / "sweep_report.csv", out / "sweep_report.json"
    md.write_text(markdown(rows) + (f"\n{footer}\n" if footer else ""))
    fields = [k for k, _ in COLUMNS] + CSV_EXTRA
    if any(r.get("training") for r in rows):
        fields += [k for k, _ in ACCURACY_COLUMNS]
    with open(csv_path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    js.write_text(json.dumps(rows, indent=1, default=str) + "\n")
    return [md, csv_path, js, *_plot(rows, out)]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m rn50.report", description=__doc__.split("\n")[0])
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--parent-run-id", help="the MLflow run of a multirun")
    which.add_argument("--experiment", help="every rn50 run of this experiment (with --filter)")
    parser.add_argument("--filter", default="", help="MLflow search filter, e.g. \"tags.gpu_model = 'NVIDIA H200'\"")
    parser.add_argument("--tracking-uri", default="sqlite:///mlflow.db", help="default: ./mlflow.db")
    parser.add_argument("--out", default="report", help="directory for the report files")
    args = parser.parse_args(argv)
    with reported("rn50.report"):
        db = tracking.health.sqlite_file(args.tracking_uri)  # its file, without a ?query
        if db is not None and not Path(db).is_file():
            raise Rn50Error(f"--tracking-uri {args.tracking_uri}: no such file; run where the runs were recorded")
        tracking.health.check_reachable(args.tracking_uri, write=False)  # a report only reads
        rows = collect(args.tracking_uri, args.parent_run_id, args.experiment, args.filter)
        if not rows:
            raise Rn50Error("no runs match; check --parent-run-id, --experiment and --filter")
        files = write(rows, Path(args.out))
    print(markdown(rows))
    print(f"wrote {', '.join(str(f) for f in files)}")

