"""Compare two sets of benchmark runs point by point, and fail on a throughput regression.

    python -m rn50.compare BASE CANDIDATE [--tolerance 0.03] [--out compare.png]

BASE and CANDIDATE are each a run id, a sweep's parent run id (its points), or an MLflow
filter string, e.g. "tags.gpu_model = 'NVIDIA H200' and tags.torch_version LIKE '2.11%'".
Runs of the same setup (the resolved config but for keys that do not change images/sec)
are one point; several runs of a point count by the median of their images/sec.
Exit status: 0 no regression, 1 a regression, 2 bad input.
"""

import argparse
import re
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Tuple

from rn50.config import keys
from rn50.config.messages import reported
from rn50.config.reads import nodes_gpus
from rn50.errors import Rn50Error
from rn50.point.identity import MOVED_KEYS, NOT_IMAGES_PER_SEC
from rn50.results import report
from rn50.results.rows import ROLE_TAG, accelerator, has_throughput, rounded, setup
from rn50 import tracking

PROG = "rn50.compare"
RUN_ID = re.compile(r"^[0-9a-f]{32}$")


@dataclass
class Point:
    """One setup's throughput on one side: the median over its runs and the range of all their windows."""

    label: str
    images_per_sec: float
    low: float
    high: float
    runs: int
    trained: str = "not recorded"
    """The proof that its runs trained (rn50/measure/trained.py): the loss across the window and the steps
    skipped in it, of the run that learned least; runs from before rn50 recorded it say so."""
    comm: str = "-"
    """Its runs' gradient all-reduce timed alone (rn50/measure/comm.py), medians: '1.90 ms, 210 GB/s';
    '-' for one device, or runs from before rn50 timed it."""

    def cell(self) -> str:
        spread = f" ({rounded(self.low)}–{rounded(self.high)})" if self.high > self.low else ""
        runs = f", {self.runs} runs" if self.runs > 1 else ""
        return f"{rounded(self.images_per_sec)}{spread}{runs}"


def setup_key(run, keys: frozenset) -> str:
    """The run's setup: its params of `keys`; an option's own key (precision.loss_scale) counts
    even where absent, since only the runs of that option have it."""
    p = run.data.params
    # Runs from before a key moved into an option's schema logged the others' value (None).
    params = {k: p.get(k, str(MOVED_KEYS.get(k, "-"))) for k in keys | option_keys()}
    return setup(params, NOT_IMAGES_PER_SEC) + f";accelerator={accelerator(run)}"


def option_keys() -> frozenset:
    """Keys that only some options of a group have (rn50/config/schema.py's option schemas)."""
    return frozenset(k for k in keys.schema_keys() if k not in keys.base_keys())


def shared_keys(runs: list) -> Tuple[frozenset, List[str]]:
    """The config keys every run recorded, and those only some did. A key that a newer rn50 added
    (data.dali.*, say) is missing from older runs, which ran as its default does; matching on it
    would leave no point in common across the upgrade that compare exists to check. Options' own
    keys are matched apart (setup_key)."""
    recorded = [set(r.data.params) for r in runs]
    every = frozenset(set.intersection(*recorded))
    return every, sorted(set.union(*recorded) - every - option_keys())


def label(run) -> str:
    """model precision batch dist, as a person names a point."""
    p, t = run.data.params, run.data.tags
    model = p.get("model.arch", "?") + (" compiled" if p.get("model.compile") == "True" else "")
    dist = t.get("dist") or nodes_gpus(p.get("dist.nodes", 1), p.get("dist.gpus_per_node", 1))
    device = " cpu" if accelerator(run) == "cpu" else ""
    return f"{model} {p.get('precision.name', '?')} bs{p.get('data.batch_size', '?')} {dist}{device}"


def find_runs(client, uri: str, spec: str, experiment: str, side: str) -> list:
    """The runs BASE or CANDIDATE names: one run, a sweep's points, or a filter's matches."""
    if RUN_ID.match(spec):
        try:
            run = client.get_run(spec)
        except tracking.client.MlflowException:
            raise Rn50Error(f"{side} {spec}: no run with this id in {uri}") from None
        if run.data.tags.get(ROLE_TAG) != "sweep":
            return [run]
        children = tracking.runs.search_runs(client, [run.info.experiment_id], f"tags.`{tracking.runs.PARENT_TAG}` = '{spec}'")
        if not children:
            raise Rn50Error(f"{side} {spec}: this sweep has no points yet")
        return children
    found = client.get_experiment_by_name(experiment)
    if found is None:
        raise Rn50Error(f"--experiment {experiment}: no such experiment in {uri}")
    try:
        runs = tracking.runs.search_runs(client, [found.experiment_id], spec)
    except tracking.client.MlflowException as exc:
        raise Rn50Error(f"{side} {spec!r}: {str(exc).splitlines()[0]}; give a run id or an MLflow filter "
                        "such as \"tags.gpu_model = 'NVIDIA H200'\"") from None
    runs = [r for r in runs if r.data.tags.get(ROLE_TAG) != "sweep"]
    if not runs:
        raise Rn50Error(f"{side} {spec!r} matches no run in experiment {experiment} of {uri}")
    return runs


def points(runs: list, side: str, spec: str, keys: frozenset) -> Dict[str, Point]:
    """Finished runs with a throughput figure, grouped by their setup over keys."""
    by_setup = defaultdict(list)
    for run in runs:
        ips = run.data.metrics.get("throughput/images_per_sec")
        if run.info.status == "FINISHED" and ips and has_throughput(run):
            by_setup[setup_key(run, keys)].append(run)
    if not by_setup:
        raise Rn50Error(f"{side} {spec}: none of its {len(runs)} run(s) finished with an images/sec figure")
    out = {}
    for key, group in by_setup.items():
        figures = [r.data.metrics["throughput/images_per_sec"] for r in group]
        lows = [r.data.metrics.get("throughput/images_per_sec_min", f) for r, f in zip(group, figures)]
        highs = [r.data.metrics.get("throughput/images_per_sec_max", f) for r, f in zip(group, figures)]
        out[key] = Point(label(group[0]), statistics.median(figures), min(lows + figures), max(highs + figures),
                         len(group), proof_cell(group), comm_cell(group))
    return out


def comm_cell(runs: list) -> str:
    """The median all-reduce time and bus bandwidth of the runs that timed one; '-' where none did."""
    timed = [r.data.metrics for r in runs if "comm/allreduce_ms" in r.data.metrics]
    if not timed:
        return "-"
    ms = statistics.median(m["comm/allreduce_ms"] for m in timed)
    busbw = statistics.median(m.get("comm/busbw_GBps", 0.0) for m in timed)
    return f"{rounded(ms)} ms, {rounded(busbw)} GB/s"


def proof_cell(runs: list) -> str:
    """'6.94 -> 0.0021, 0 skipped': the loss of the run whose loss ended highest, and the most steps
    any run skipped in its window; 'not recorded' for runs logged before rn50 proved that runs trained."""
    proven = [r.data.metrics for r in runs if "train/loss_last" in r.data.metrics]
    if not proven:
        return "not recorded"
    worst = max(proven, key=lambda m: m["train/loss_last"])
    skipped = int(max(m.get("train/skipped_steps_window", 0) for m in proven))
    return (f"{report.cell('loss_first', worst['train/loss_first'])} -> "
            f"{report.cell('loss_last', worst['train/loss_last'])}, "
            f"{skipped} skipped")


def verdict(base: Point, cand: Point, tolerance: float) -> str:
    """same within the tolerance; within noise when each median lies in the other's window range."""
    ratio = cand.images_per_sec / base.images_per_sec
    if abs(ratio - 1) <= tolerance:
        return "same"
    if base.low <= cand.images_per_sec <= base.high and cand.low <= base.images_per_sec <= cand.high:
        return "within noise"
    return "faster" if ratio > 1 else "slower (regression)"


def distinct_labels(keys: List[str], base: Dict[str, Point]) -> Dict[str, str]:
    """Each point's label, with the config keys that tell apart points of the same label."""
    settings = {k: dict(kv.split("=", 1) for kv in k.split(";")) for k in keys}
    by_label = defaultdict(list)
    for k in keys:
        by_label[base[k].label].append(k)
    names = {}
    for name, same in by_label.items():
        differ = sorted({n for k in same for n, v in settings[k].items()
                         if any(settings[o].get(n) != v for o in same)})
        for k in same:
            names[k] = " ".join([name] + [f"{n}={settings[k].get(n)}" for n in differ])
    return names


def natural(text: str) -> list:
    """Sort key that puts bs64 before bs128."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


def compare(base: Dict[str, Point], cand: Dict[str, Point], tolerance: float) -> List[Tuple[str, Point, Point, str]]:
    common = sorted(set(base) & set(cand), key=lambda k: natural(base[k].label))
    if not common:
        def brief(side):
            names = sorted({p.label for p in side.values()}, key=natural)
            return ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")

        raise Rn50Error(f"BASE and CANDIDATE have no point in common: BASE has {brief(base)}; "
                        f"CANDIDATE has {brief(cand)} (a point is the whole setup: model, precision, batch, "
                        "dist, data, optimizer, bench steps)")
    names = distinct_labels(common, base)
    return [(names[k], base[k], cand[k], verdict(base[k], cand[k], tolerance)) for k in common]


def markdown(rows, tolerance: float) -> str:
    """The table; the all-reduce columns where a point of either side timed one (several devices)."""
    comm = any(b.comm != "-" or c.comm != "-" for _, b, c, _ in rows)
    extra = " base all-reduce | candidate all-reduce |" if comm else ""
    lines = [f"| point | base images/sec | candidate images/sec | ratio | verdict |{extra} base trained "
             "| candidate trained |", "|" + " --- |" * (9 if comm else 7)]
    for name, b, c, v in rows:
        cells = f" {b.comm} | {c.comm} |" if comm else ""
        lines.append(f"| {name} | {b.cell()} | {c.cell()} | {c.images_per_sec / b.images_per_sec:.3f} | {v} |"
                     f"{cells} {b.trained} | {c.trained} |")
    counts = defaultdict(int)
    for *_, v in rows:
        counts[v] += 1
    summary = ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
    return "\n".join(lines) + f"\n\n{len(rows)} points, tolerance {tolerance:.1%}: {summary}\n"


def plot(rows, tolerance: float, path: Path) -> Path:
    """One bar per point from 1.0 to candidate/base; the tolerance band shaded."""
    colours = {"faster": "tab:green", "slower (regression)": "tab:red", "within noise": "tab:gray", "same": "tab:gray"}
    fig = report.charts().Figure(figsize=(7, 1.2 + 0.4 * len(rows)))
    ax = fig.subplots()
    ratios = [c.images_per_sec / b.images_per_sec for _, b, c, _ in rows]
    ys = range(len(rows))
    ax.barh(ys, [r - 1 for r in ratios], left=1, color=[colours[v] for *_, v in rows])
    ax.axvspan(1 - tolerance, 1 + tolerance, color="0.9", zorder=0, label=f"±{tolerance:.0%}")
    ax.axvline(1, color="k", linewidth=0.8)
    ax.set_yticks(list(ys), [name for name, *_ in rows])
    ax.invert_yaxis()
    ax.set(xlabel="candidate / base images/sec", title="Throughput against the base")
    ax.legend(fontsize="small", loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    return path


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog=f"python -m {PROG}", description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="Exit status: 0 no regression, 1 a regression, 2 bad input.")
    parser.add_argument("base", metavar="BASE", help="run id, sweep parent run id, or MLflow filter string")
    parser.add_argument("candidate", metavar="CANDIDATE", help="the same kinds as BASE")
    parser.add_argument("--tracking-uri", default="sqlite:///mlflow.db", help="default: ./mlflow.db")
    parser.add_argument("--experiment", default="rn50", help="where filter strings search (default: rn50)")
    parser.add_argument("--tolerance", type=float, default=0.03,
                        help="slower by more than this fraction is a regression (default: 0.03)")
    parser.add_argument("--out", default="compare.png", help="the plot (default: compare.png)")
    args = parser.parse_args(argv)
    with reported(PROG):
        if not 0 <= args.tolerance < 1:
            raise Rn50Error(f"--tolerance {args.tolerance}: give a fraction in [0, 1), e.g. 0.03 for 3%")
        uri = args.tracking_uri
        db = uri.removeprefix("sqlite:///")
        if db != uri and not Path(db).is_file():
            raise Rn50Error(f"--tracking-uri {uri}: no such file; run where the runs were recorded")
        tracking.health.check_reachable(uri, write=False)  # a comparison only reads
        client = tracking.client.open_client(uri)
        specs = (("BASE", args.base), ("CANDIDATE", args.candidate))
        found = [find_runs(client, uri, spec, args.experiment, side) for side, spec in specs]
        keys, unshared = shared_keys(found[0] + found[1])
        rows = compare(*[points(runs, side, spec, keys) for runs, (side, spec) in zip(found, specs)], args.tolerance)
        image = plot(rows, args.tolerance, Path(args.out))
    print(markdown(rows, args.tolerance))
    if unshared:
        shown = ", ".join(unshared[:4]) + (f" and {len(unshared) - 4} more" if len(unshared) > 4 else "")
        print(f"not matched on (recorded by only some runs, e.g. keys a newer rn50 added): {shown}")
    print(f"wrote {image}")
    regressions = [name for name, *_, v in rows if v == "slower (regression)"]
    if regressions:
        print(f"{PROG}: {len(regressions)} regression(s): {', '.join(regressions)}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
