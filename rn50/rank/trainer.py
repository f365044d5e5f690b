"""The Lightning Trainer every run of a rank builds: its devices, strategy, precision plugin,
cluster environment and profiling callbacks, and the SIGTERM handling rn50 changes."""

from pathlib import Path

import pytorch_lightning as pl

from rn50.config.reads import world_size
from rn50.distributed import peers
from rn50.options.components import Options
from rn50.profiling.nvtx import NvtxRanges
from rn50.recipe.train_step import buffer_sync


def profiling_callbacks(cfg, device_type: str, first_step: int, out: Path, options: Options) -> list:
    """NVTX ranges on GPUs, and the profiler of the steps from first_step on (after the measured windows).
    options: the run's, built once (run_rank)."""
    callbacks = []
    if cfg.profiler.nvtx and device_type == "cuda":
        callbacks.append(NvtxRanges())
    return callbacks + options.profiler.callbacks(cfg, first_step, device_type, out)


def trainer_args(cfg, device_type: str, out: Path, options: Options, requeue: bool = False) -> dict:
    """The Trainer arguments of every run: devices, strategy, precision, cluster environment."""
    world = world_size(cfg)
    return dict(
        accelerator="gpu" if device_type == "cuda" else "cpu",
        devices=cfg.dist.gpus_per_node,
        num_nodes=cfg.dist.nodes,
        strategy=peers.RosterDDP(gradient_as_bucket_view=True, **buffer_sync(cfg.dist.broadcast_buffers))
        if world > 1 else "auto",
        plugins=[options.precision.plugin(device_type),
                 *options.cluster.environment(requeue)],
        benchmark=cfg.model.cudnn_benchmark,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        use_distributed_sampler=False,
        default_root_dir=out,
    )


def build_trainer(cfg, device_type: str, callbacks: list, total_steps: int, out: Path, options: Options) -> pl.Trainer:
    trainer = pl.Trainer(
        **trainer_args(cfg, device_type, out, options),
        max_steps=total_steps,
        callbacks=callbacks,
        profiler=options.profiler.lightning_profiler(out),
        enable_checkpointing=False,
        limit_val_batches=0,
    )
    skip_sigterm_broadcast(trainer)
    return trainer


def local_gpu(cfg, options: Options) -> int:
    """This rank's GPU index as Lightning picks it: the local rank its cluster environment reads
    (LOCAL_RANK in rn50's pool and under torchrun, SLURM_LOCALID under SLURM); 0 alone. The
    cluster environment says who started the ranks (rn50/options/clusters.py)."""
    envs = options.cluster.environment(False)
    return envs[0].local_rank() if envs else 0


STARTED_BY_RN50 = False  # python -m rn50.rank: a process of rn50's pool, or one a profiler started


def started_by_rn50() -> None:
    """This process is a rank of rn50's own (python -m rn50.rank): see skip_sigterm_broadcast."""
    global STARTED_BY_RN50
    STARTED_BY_RN50 = True


def skip_sigterm_broadcast(trainer: pl.Trainer) -> None:
    """Lightning 2.6 broadcasts a SIGTERM flag and reads it back on the host every DDP step
    (Lightning #21487), a device sync inside the measured window, and broadcasts again from its
    SIGTERM handler, which can pair with another rank's collective and hang. rn50's launchers
    stop all ranks together (the pool, torchrun, srun, SLURM's requeue), so both broadcasts go.

    A rank of rn50's own pool gets no Lightning handler at all: SIGTERM ends it at once. Under
    torchrun and SLURM, SIGTERM only sets the flag that stops the loop at the next step."""
    loop = trainer.fit_loop.epoch_loop
    if hasattr(loop, "_broadcast_sigterm_tensor"):
        loop._broadcast_sigterm_tensor = lambda: None
    connector = trainer._signal_connector
    if STARTED_BY_RN50:
        connector.register_signal_handlers = lambda: None
    elif hasattr(connector, "_sigterm_notifier_fn"):
        connector._sigterm_notifier_fn = lambda signum, frame: setattr(connector, "received_sigterm", True)
