"""What each rank measured, and the one pure step that turns every rank's part into a run's record.

Ranks send RankResults (rn50/wire.py: plain data, no tensors); `summarize` makes the metrics, tags,
per-window series and files that tracking.py logs. The process that owns the MLflow
run calls it: the launcher for cluster=local, rank 0 under torchrun and SLURM.
"""

import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional

from rn50.config.schema import TrainName

from rn50.config.reads import dist_name, world_size
from rn50.measure import comm, host, nvml, timing, trained
from rn50.wire import RankResult


@dataclass
class RunRecord:
    metrics: Dict[str, float]
    tags: Dict[str, str]
    series: Dict[str, List[float]]
    files: List[str]
    failure: Optional[str] = None
    """Why a run that ran to its end still failed, in one line: it did not train (diverged)."""


def summarize(cfg, ranks: List[RankResult], started_at: float, now: float, options) -> RunRecord:
    """Metrics, tags, series and the numbers behind them; started_at is when the run (or the
    sweep point) began, so startup and wall time are measured from the command's side. options: the
    run's (rn50/options/components.py), whose precision names the MFU peak's math mode.

    A figure counts only if its run trained (rn50/measure/trained.py): every run carries the proof, and a
    run whose loss stopped being finite carries no images/sec, MFU or energy figure at all."""
    zero = ranks[0]
    world, batch = len(ranks), zero.batch_size
    warmup, measured = cfg.bench.warmup_steps, cfg.bench.steps * cfg.bench.repeats
    proof = trained.proof_metrics(zero.losses, zero.skipped, zero.loss_scale, warmup, measured)
    failure = trained.diverged_line([r.losses for r in ranks], warmup + measured) or trained.stalled_line(proof,
                                                                                                         measured)
    # zero.metrics: the profilers' and the batch search's
    metrics = {} if failure else {**figures(cfg, ranks, options.precision.peak), **zero.metrics}
    metrics.update(proof)
    metrics["time/startup_s"] = zero.first_step_at - started_at
    metrics.update(timing.startup_stages(started_at, zero.started, zero.first_step_at))  # where it went
    metrics["time/warmup_s"] = max(r.warmup_s for r in ranks)
    metrics["time/wall_s"] = now - started_at

    hosts = sorted({r.hostname for r in ranks})
    tags = dict(zero.env_tags)
    tags.update(
        gpu_count=str(sum(1 for r in ranks if r.samples)),
        world_size=str(world),
        nodes=str(cfg.dist.nodes),
        hostnames=",".join(hosts),
        node_hostnames=",".join(f"{n}:{h}" for n, h in sorted({(r.node_rank, r.hostname) for r in ranks})),
        dist=dist_name(cfg),
        **{trained.PROOF_TAG: "1"},
    )
    if not failure:  # what else ran beside the windows: a figure's company, not one of its own
        found, said = contention(ranks)
        metrics.update(found)
        tags.update(said)
        if "data/wait_pct" in metrics:
            tags["input_bound"] = str(timing.input_bound(metrics)).lower()
        changed = comm.network_changed(metrics)
        if changed is not None:
            tags["network_changed"] = str(changed).lower()
    transport = comm.joined(r.transport for r in ranks)
    if transport:
        tags["comm_transport"] = transport
    sources = sorted({r.energy_source for r in ranks if r.energy_source})
    if sources:
        tags["energy_source"] = ",".join(sources)
    if cfg.profiler.name != "none":
        tags["profiled"] = cfg.profiler.name  # sweep reports keep it out of the speedup reference
    series = {"train/loss": zero.losses}
    if not failure:
        windows = timing.slowest([r.windows for r in ranks])
        series["throughput/images_per_sec_window"] = timing.window_images_per_sec(windows, batch, world)
    return RunRecord(metrics, tags, series, list(zero.files), failure and did_not_train(cfg, failure))


def did_not_train(cfg, line: str) -> str:
    """The one line of a run that did not train, with what would work."""
    if line.startswith("training stalled"):
        fix = ("use a lower precision.loss_scale, or precision=amp (dynamic scaling)"
               if cfg.precision.name == "amp_static" else
               f"give it more bench.warmup_steps ({cfg.bench.warmup_steps} now): a dynamic loss scale starts at "
               "65536 and halves at each overflowing step")
    else:
        fix = f"lower optim.lr (it was {cfg.optim.lr:g})"
    return f"{line}; a run that does not train has no figure: {fix}"


def figures(cfg, ranks: List[RankResult], math_mode: str) -> Dict[str, float]:
    """The measured windows' figures: throughput, step times, GPU telemetry, energy, MFU (math_mode: the
    precision's, which picks the GPU's peak)."""
    zero = ranks[0]
    world, batch = len(ranks), zero.batch_size
    windows = timing.slowest([r.windows for r in ranks])
    metrics = timing.throughput_metrics(windows, batch, world)
    per_device = metrics["throughput/images_per_sec_per_device"]
    gpu_samples = {r.rank: r.samples for r in ranks if r.samples}
    metrics.update(nvml.telemetry_metrics(gpu_samples))
    joules = {r.rank: r.energy_j for r in ranks if r.energy_j is not None}
    metrics.update(nvml.energy_metrics(joules, batch * cfg.bench.steps * cfg.bench.repeats))
    if not gpu_samples:
        cpu = [r.process_cpu_pct / r.cpu_cores for r in ranks if r.process_cpu_pct is not None]
        if cpu:  # the share of the cores each rank may use, so a CPU run has a utilization too
            metrics["cpu/utilization_pct"] = sum(cpu) / len(cpu)
    metrics.update(communication(ranks))
    metrics["host/gc_collections"] = max(r.gc_collections for r in ranks)
    metrics["host/gc_ms"] = max(r.gc_ms for r in ranks)
    if zero.flops_per_image:
        metrics["model/gflops_per_image"] = zero.flops_per_image / 1e9
        metrics["flops/achieved_tflops_per_device"] = per_device * zero.flops_per_image / 1e12
        gpu = zero.env_tags.get("gpu_model") if gpu_samples else None
        peak_tflops = timing.peak_tflops(cfg.mfu, gpu, math_mode)
        if peak_tflops is not None:
            metrics["mfu_pct"] = timing.mfu_pct(per_device, zero.flops_per_image, peak_tflops)
            metrics["mfu/peak_tflops_per_device"] = peak_tflops
    return metrics


def communication(ranks: List[RankResult]) -> Dict[str, float]:
    """comm/allreduce_ms (the slowest rank's, as a window is), comm/busbw_GBps, comm/gradient_MB and, where
    the ranks timed it before the first step too, comm/allreduce_before_ms and comm/allreduce_change_pct, of a
    run whose ranks timed their gradients' all-reduce; nothing for one rank."""
    timed = [r.allreduce_ms for r in ranks if r.allreduce_ms]
    if len(ranks) < 2 or not timed:
        return {}
    before = [r.allreduce_before_ms for r in ranks if r.allreduce_before_ms]
    return comm.allreduce_metrics(max(timed), max(before) if before else None, ranks[0].allreduce_bytes, len(ranks))


def contention(ranks: List[RankResult]) -> tuple:
    """(metrics, tags) of the hosts' CPUs and GPUs over the windows: what the run itself used and what
    else ran beside it. Metrics: cpu/cores_per_device (cores each rank's processes kept busy, its
    DataLoader workers and DALI's threads included: the CPUs a node needs per device to feed it),
    host/busy_cores (the busiest host's busy cores, any process and the kernel's own work included: how
    near the CPUs were to their end), host/other_cpu_cores (the most on any host: cores other processes
    kept busy) and gpu/other_processes; tags contended (true or false) and, where it is true, contention
    saying what was found."""
    metrics, found, own_cores = {}, [], []
    for hostname in sorted({r.hostname for r in ranks}):
        mine = [r for r in ranks if r.hostname == hostname]
        if any(r.host_busy_s is None or r.own_cpu_s is None for r in mine):
            continue
        wall = max(r.windows_wall_s for r in mine)
        busy, own = max(r.host_busy_s for r in mine), sum(r.own_cpu_s for r in mine)
        if wall > 0:
            own_cores += [max(0.0, r.own_cpu_s) / wall for r in mine]  # a child gone between the readings
            metrics["host/busy_cores"] = max(busy / wall, metrics.get("host/busy_cores", 0.0))
        others = host.other_cores(busy, own, wall)
        metrics["host/other_cpu_cores"] = max(others, metrics.get("host/other_cpu_cores", 0.0))
        if host.cpu_contended(others, mine[0].cpu_cores):
            found.append(f"other processes kept {others:.1f} of {mine[0].cpu_cores} cores busy on {hostname}")
    if own_cores:
        metrics["cpu/cores_per_device"] = sum(own_cores) / len(own_cores)
    own = [r.pid for r in ranks]  # a rank's GPU may show another rank of the run
    gpus = {r.rank: others for r in ranks if (others := host.other_gpu_processes(r.gpu_pids, own))}
    if any(r.samples for r in ranks):  # GPU ranks
        metrics["gpu/other_processes"] = float(sum(len(p) for p in gpus.values()))
    for rank, pids in sorted(gpus.items()):
        found.append(f"{len(pids)} other process{'es' * (len(pids) > 1)} on rank {rank}'s GPU "
                     f"(pid {', '.join(map(str, pids))})")
    if not metrics:
        return metrics, {}
    return metrics, {"contended": str(bool(found)).lower(), **({"contention": "; ".join(found)} if found else {})}


def summarize_training(cfg, ranks: List[RankResult], started_at: float, now: float) -> RunRecord:
    """train=accuracy: rank 0's end-of-run metrics and per-epoch series, and target_reached."""
    zero = ranks[0]
    metrics = {**zero.metrics, "time/wall_s": now - started_at}
    tags = {**zero.env_tags, "world_size": str(world_size(cfg)),
            "nodes": str(cfg.dist.nodes), "dist": dist_name(cfg),
            "target_reached": str("time/to_target_s" in metrics).lower(), trained.PROOF_TAG: "1"}
    return RunRecord(metrics, tags, dict(zero.series), list(zero.files))


def training_headline(name: str, metrics: Dict[str, Any]) -> str:
    best = metrics.get("val/best_top1")
    text = f"{name}: {int(metrics.get('train/epochs', 0))} epochs in {metrics['time/train_s']:.1f} s"
    text += f", best top-1 {100 * best:.2f}%" if best is not None else ""
    to_target = metrics.get("time/to_target_s")
    return text + (f", target reached after {to_target:.1f} s" if to_target is not None else ", target not reached")


def finite_or_none(metrics: Dict[str, Any]) -> Dict[str, Any]:
    """JSON has no NaN: a diverged run's losses go into summary.json as null."""
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in metrics.items()}


def write_files(record: RunRecord, ranks: List[RankResult], out: Path, run_id: str, cfg) -> List[str]:
    """step_times.csv, ranks.csv, gpu_telemetry.csv and summary.json in `out`; their paths.
    train=accuracy: summary.json and epochs.jsonl (rn50/rank/training.py writes it)."""
    if cfg.train.name == TrainName.accuracy:
        summary = {"run_id": run_id, "dist": dist_name(cfg), "precision": cfg.precision.name,
                   "batch_size": ranks[0].batch_size, **finite_or_none(record.metrics), "target_reached": record.tags["target_reached"]}
        (out / "summary.json").write_text(json.dumps(summary) + "\n")
        return [str(out / "summary.json")] + [str(p) for p in [out / "epochs.jsonl"] if p.is_file()]
    files = [out / "step_times.csv", out / "ranks.csv"]
    timing.write_steps_csv(files[0], [r.windows for r in ranks])
    write_ranks_csv(files[1], ranks)
    gpu_samples = {r.rank: r.samples for r in ranks if r.samples}
    if gpu_samples:
        files.append(out / "gpu_telemetry.csv")
        nvml.write_csv(files[-1], gpu_samples)
    summary = {"run_id": run_id, "dist": dist_name(cfg), "precision": cfg.precision.name,
               "batch_size": ranks[0].batch_size, **finite_or_none(record.metrics)}
    if "comm_transport" in record.tags:
        summary["transport"] = record.tags["comm_transport"]
    files.append(out / "summary.json")
    files[-1].write_text(json.dumps(summary) + "\n")
    return [str(f) for f in files] + sorted(str(f) for f in out.glob("*profiler*.txt")) + record.files


RESULT_FILES = ("step_times.csv", "ranks.csv", "gpu_telemetry.csv", "summary.json", "result.json", "result.partial")


def remove_files(out: Path) -> List[str]:
    """The run's result files that write_files and the kept result would leave in `out`, removed (a full
    disk stopped them: none is left half-written); the names of those a run writes."""
    for name in RESULT_FILES:
        (Path(out) / name).unlink(missing_ok=True)
    return ["result.json", "summary.json", "step_times.csv", "ranks.csv"]


RANK_COLUMNS = ("rank", "node_rank", "local_rank", "hostname", "pid", "process_cpu_pct")


def write_ranks_csv(path, ranks: List[RankResult]) -> None:
    """Where each rank ran and how busy its process kept the host's CPU in the measured windows."""
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(RANK_COLUMNS)
        for r in ranks:
            cpu = "" if r.process_cpu_pct is None else f"{r.process_cpu_pct:.1f}"
            writer.writerow([r.rank, r.node_rank, r.local_rank, r.hostname, r.pid, cpu])


def headline(name: str, metrics: Dict[str, Any]) -> str:
    """The run's line: its figure, its proof, whether its input bounded it, whether its network changed
    under it, and what else ran beside its windows (metrics' `contention`, the tag of that name, where it has one)."""
    proof, contention = trained.note(metrics), metrics.get("contention")
    starved, network = timing.input_bound_note(metrics), comm.network_change_note(metrics)
    return (f"{name}: {metrics['throughput/images_per_sec']:,.1f} images/sec "
            f"({metrics['throughput/images_per_sec_per_device']:,.1f} per device), "
            f"step {metrics['step_time/median_ms']:.2f} ms median, first step after {metrics['time/startup_s']:.1f} s"
            + (f"; {proof}" if proof else "") + (f"; {starved}" if starved else "")
            + (f"; {network}" if network else "") + (f"; contended: {contention}" if contention else ""))
