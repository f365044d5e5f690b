"""One rank of a benchmark run: build, fit, measure; rank 0 logs to MLflow.

cluster=local starts it as `python -m rn50.worker CONFIG.yaml --run-id ID --out DIR`,
where CONFIG.yaml is the resolved config `python -m rn50` wrote; under torchrun and
SLURM, `python -m rn50` is a rank itself and calls `run`.
"""

import argparse
import json
import os
from pathlib import Path
from typing import Optional

import pytorch_lightning as pl
import torch
from omegaconf import OmegaConf
from pytorch_lightning.plugins.environments import SLURMEnvironment, TorchElasticEnvironment
from pytorch_lightning.profilers import SimpleProfiler
from pytorch_lightning.strategies import DDPStrategy
from torch.distributed.elastic.multiprocessing.errors import record

from rn50 import console, data, environment, mfu, nvml, precision, timing, tracking
from rn50.measure import Benchmark, write_ranks_csv
from rn50.model import ResNetModule
from rn50.ncu import NcuRange
from rn50.nvtx import NvtxRanges
from rn50.profile import TorchProfile
from rn50.schema import Accelerator, ClusterName, ProfilerName, Rn50Config, dist_name, profiled_steps


def load_config(path: str):
    return OmegaConf.merge(OmegaConf.structured(Rn50Config), OmegaConf.load(path))


def profiling_callbacks(cfg, device_type: str, first_step: int, out: Path) -> list:
    """NVTX ranges on GPUs, and the profiler of the steps from first_step on (after the measured windows)."""
    callbacks = []
    if cfg.profiler.nvtx and device_type == "cuda":
        callbacks.append(NvtxRanges())
    if cfg.profiler.name == ProfilerName.pytorch:
        callbacks.append(TorchProfile(cfg.profiler, first_step, device_type, out))
    elif cfg.profiler.name == ProfilerName.ncu:
        callbacks.append(NcuRange(first_step, cfg.profiler.steps))
    return callbacks


def build_trainer(cfg, device_type: str, bench: Benchmark, out: Path) -> pl.Trainer:
    world = cfg.dist.nodes * cfg.dist.gpus_per_node
    profiler = None
    if cfg.profiler.name == ProfilerName.simple:
        profiler = SimpleProfiler(dirpath=out, filename="profiler")
    trainer = pl.Trainer(
        accelerator="gpu" if device_type == "cuda" else "cpu",
        devices=cfg.dist.gpus_per_node,
        num_nodes=cfg.dist.nodes,
        strategy=DDPStrategy(gradient_as_bucket_view=True) if world > 1 else "auto",
        plugins=[precision.plugin(cfg.precision.name, device_type, cfg.precision.loss_scale),
                 *cluster_environment(cfg)],
        max_steps=bench.timer.total_steps + profiled_steps(cfg),
        callbacks=[bench, *profiling_callbacks(cfg, device_type, bench.timer.total_steps, out)],
        profiler=profiler,
        benchmark=True,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        limit_val_batches=0,
        use_distributed_sampler=False,
        default_root_dir=out,
    )
    skip_sigterm_broadcast(trainer)
    return trainer


def cluster_environment(cfg) -> list:
    """Say which launcher started the ranks: Lightning would otherwise take SLURM's variables
    over torchrun's whenever a SLURM allocation surrounds a torchrun or local run."""
    if cfg.cluster.name == ClusterName.slurm:
        return [SLURMEnvironment(auto_requeue=False)]  # a benchmark is not resumed
    return [TorchElasticEnvironment()] if TorchElasticEnvironment.detect() else []


def skip_sigterm_broadcast(trainer: pl.Trainer) -> None:
    """Lightning 2.6 broadcasts a SIGTERM flag and reads it back on the host every DDP step
    (Lightning #21487), a device sync inside the measured window. The elastic agent that
    starts rn50's ranks already stops them all together on SIGTERM, so the broadcast goes."""
    loop = trainer.fit_loop.epoch_loop
    if hasattr(loop, "_broadcast_sigterm_tensor"):
        loop._broadcast_sigterm_tensor = lambda: None


def log_run(cfg, bench: Benchmark, trainer: pl.Trainer, device_type: str, run_id: str, out: Path) -> dict:
    """Rank 0: turn every rank's windows and samples into metrics, files and tags."""
    world = trainer.world_size
    windows = timing.slowest([r["windows"] for r in bench.ranks])
    metrics = timing.summarize(windows, cfg.data.batch_size, world)
    per_device = metrics["throughput/images_per_sec_per_device"]
    gpu_samples = {rank: r["samples"] for rank, r in enumerate(bench.ranks) if r["samples"]}
    metrics.update(nvml.summarize(gpu_samples))

    flops = mfu.flops_per_image(cfg.model.arch.value, cfg.model.num_classes, cfg.data.image_size)
    metrics["model/gflops_per_image"] = flops / 1e9
    metrics["flops/achieved_tflops_per_device"] = per_device * flops / 1e12
    tags = {**environment.software_tags(), **environment.gpu_tags(device_type)}
    peak = mfu.peak_tflops(cfg.mfu, tags["gpu_model"] if device_type == "cuda" else None,
                           precision.MATH_MODE[cfg.precision.name])
    if peak is not None:
        metrics["mfu_pct"] = mfu.mfu_pct(per_device, flops, peak)
        metrics["mfu/peak_tflops_per_device"] = peak
    hosts = sorted({r["hostname"] for r in bench.ranks})
    node_hosts = sorted({(r["node_rank"], r["hostname"]) for r in bench.ranks})
    tags.update(
        gpu_count=str(len(gpu_samples)),
        world_size=str(world),
        nodes=str(cfg.dist.nodes),
        hostnames=",".join(hosts),
        node_hostnames=",".join(f"{node}:{host}" for node, host in node_hosts),
        accelerator=device_type,
        dist=dist_name(cfg),
    )

    files = [out / "step_times.csv", out / "ranks.csv"]
    timing.write_steps_csv(files[0], [r["windows"] for r in bench.ranks])
    write_ranks_csv(files[1], bench.ranks)
    if gpu_samples:
        files.append(out / "gpu_telemetry.csv")
        nvml.write_csv(files[-1], gpu_samples)
    files += sorted(out.glob("*profiler*.txt"))
    for profile in (cb for cb in trainer.callbacks if isinstance(cb, TorchProfile)):
        metrics.update(profile.metrics)
        files += profile.files
    if cfg.profiler.name != ProfilerName.none:
        tags["profiled"] = cfg.profiler.name.value  # sweep reports keep it out of the speedup reference
    summary = {"run_id": run_id, "dist": dist_name(cfg), "precision": cfg.precision.name.value,
               "batch_size": cfg.data.batch_size, **metrics}
    (out / "summary.json").write_text(json.dumps(summary) + "\n")
    files.append(out / "summary.json")
    series = {"throughput/images_per_sec_window": timing.window_images_per_sec(
        windows, cfg.data.batch_size, world)}
    tracking.log_results(cfg.mlflow.tracking_uri, run_id, metrics, tags, series, map(str, files))
    return summary


def run(cfg, run_id: Optional[str], out: Path) -> None:
    """This process's rank of the run; rank 0 logs into run_id."""
    console.quiet()
    device_type = "cuda" if cfg.dist.accelerator == Accelerator.gpu else "cpu"
    precision.set_math_mode(cfg.precision.name)
    pl.seed_everything(cfg.seed, verbose=False)
    fused = cfg.optim.fused if cfg.optim.fused is not None else device_type == "cuda"
    model = ResNetModule(cfg.model, cfg.optim, fused)
    bench = Benchmark(cfg.bench, cfg.telemetry, device_type)
    trainer = build_trainer(cfg, device_type, bench, out)
    trainer.fit(model, datamodule=data.build(cfg))
    if trainer.is_global_zero:
        log_run(cfg, bench, trainer, device_type, run_id, out)
    if torch.distributed.is_initialized():
        # Leave together and tear the process group down: a rank exiting with its
        # communicator threads alive can abort (SIGABRT) and fail a finished run.
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()


@record
def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m rn50.worker")
    parser.add_argument("config", help="resolved config YAML written by `python -m rn50`")
    parser.add_argument("--run-id", required=True, help="MLflow run that rank 0 logs into")
    parser.add_argument("--out", required=True, help="directory for the run's files")
    args = parser.parse_args(argv)
    run(load_config(args.config), args.run_id, Path(args.out))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
