"""train=accuracy on one rank: fit the recipe (rn50/recipe/accuracy_module.py) for train.epochs, evaluating on
data.root/val, with a checkpoint after every epoch; rank 0 returns the run's per-epoch record.

Like a throughput run, a rank never touches MLflow: rank 0's RankResult carries the epochs as
series and the launcher logs them (rn50/results/summary.py, rn50/tracking/runs.py).
"""

import json
import os
import socket
import time
from pathlib import Path
from typing import Dict, List, Optional

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ModelCheckpoint

from rn50.config.schema import Accelerator

from rn50.config.reads import world_size
from rn50.errors import Requeued
from rn50.measure.device import gpu_tags, software_tags
from rn50.rank.progress import EpochProgress
from rn50.rank.trainer import skip_sigterm_broadcast, trainer_args
from rn50.recipe import optimizers
from rn50.recipe.accuracy_module import AccuracyModule
from rn50.recipe.precision import read_scaler, set_math_mode
from rn50.results import resume
from rn50.wire import RankResult

EPOCHS_FILE = "epochs.jsonl"  # one line per finished epoch, as the launcher logs them


class EpochRecord(pl.Callback):
    """Times, losses and accuracies of every epoch, kept in checkpoints so a resumed run carries
    the epochs it did not run itself. Also reseeds every epoch from (seed, epoch, rank): data
    order and augmentation then do not depend on how many epochs this process has run, and a
    resumed run trains as an uninterrupted one would."""

    def __init__(self, seed: int, epochs: int, eval_every: int, target_top1: float, global_batch: int, out: Path):
        self.seed, self.epochs, self.eval_every, self.target = seed, epochs, eval_every, target_top1
        self.global_batch, self.out = global_batch, out
        self.history: List[Dict[str, float]] = []
        self.to_target_s: Optional[float] = None
        self._started = self._train_end = 0.0
        self._epoch_end: Optional[float] = None  # the last epoch's end in this process

    def state_dict(self):
        return {"history": self.history, "to_target_s": self.to_target_s}

    def load_state_dict(self, state):
        self.history, self.to_target_s = list(state["history"]), state["to_target_s"]

    @property
    def wall_s(self) -> float:
        """Wall-clock seconds of the epochs so far: the last one's elapsed time and its
        checkpoint write, once that is known."""
        if not self.history:
            return 0.0
        return self.history[-1]["time/elapsed_s"] + self.history[-1].get("time/checkpoint_s", 0.0)

    def on_train_start(self, trainer, pl_module):
        self._started = time.perf_counter()
        if self.history and "time/checkpoint_s" not in self.history[-1]:
            self._recover_last_write()

    def _recover_last_write(self) -> None:
        """A resumed run: its checkpoint was saved while its own write was being timed, so the
        write's seconds are only in epochs.jsonl (if the next epoch got to start)."""
        try:
            rows = [json.loads(line) for line in (self.out / EPOCHS_FILE).read_text().splitlines()]
        except (OSError, ValueError):
            return
        last = self.history[-1]
        for row in rows:
            if row.get("epoch") == last["epoch"] and "time/checkpoint_s" in row:
                last["time/checkpoint_s"] = row["time/checkpoint_s"]

    def _close_turnover(self, trainer, pl_module):
        """The seconds from the last epoch's end to now: its checkpoint write (ModelCheckpoint
        runs after every other epoch-end hook) and Lightning's epoch turnover. Counted into
        time/elapsed_s from the next epoch on, so time to target is wall-clock time."""
        if self._epoch_end is None or not self.history:
            return
        self.history[-1]["time/checkpoint_s"] = self._now(pl_module) - self._epoch_end
        self._epoch_end = None
        self._save(trainer)

    def _save(self, trainer):
        if trainer.is_global_zero:  # the epochs so far, for a look while it runs
            with open(self.out / EPOCHS_FILE, "w") as f:
                f.writelines(json.dumps(r) + "\n" for r in self.history)

    def on_train_end(self, trainer, pl_module):
        self._close_turnover(trainer, pl_module)

    def on_train_epoch_start(self, trainer, pl_module):
        self._close_turnover(trainer, pl_module)
        epoch = trainer.current_epoch
        pl.seed_everything(self.seed + 100_003 * (epoch + 1) + trainer.global_rank, verbose=False)
        if hasattr(trainer.datamodule, "seed_epoch"):  # imagefolder's workers: before the epoch's iterator
            trainer.datamodule.seed_epoch(epoch)
        # Lightning validates every n epochs; the last epoch is evaluated too, whatever n.
        trainer.check_val_every_n_epoch = 1 if epoch == self.epochs - 1 else self.eval_every
        pl_module.evaluation = None
        self._started, self._train_end = time.perf_counter(), 0.0

    def _now(self, pl_module) -> float:
        if pl_module.device.type == "cuda":  # epoch edges only: the time is the device's too
            torch.cuda.synchronize(pl_module.device)
        return time.perf_counter()

    def on_validation_start(self, trainer, pl_module):
        if trainer.state.fn == "fit":  # validation inside fit: the epoch's training is over
            self._train_end = self._now(pl_module)

    def on_train_epoch_end(self, trainer, pl_module):
        loss = pl_module.epoch_loss()
        epoch = trainer.current_epoch + 1
        if not loss.healthy:  # before ModelCheckpoint (Lightning runs it last): the good one stays
            kept = (f"the last good checkpoint (epoch {epoch - 1}) stays in {self.out / resume.CHECKPOINT_DIR / resume.LAST}"
                    if epoch > 1 else "no checkpoint was written")
            raise Diverged(f"training diverged at epoch {epoch}: its last loss or its weights are not finite "
                           f"(mean of the finite losses {loss.mean:.4g}); {kept}; start a new run with a lower optim.lr")
        now = self._now(pl_module)
        train_s = (self._train_end or now) - self._started
        row = {"epoch": epoch, "train/loss": loss.mean, "train/nonfinite_steps": float(loss.nonfinite_steps),
               **scaler_figures(trainer),
               "train/images_per_sec": trainer.num_training_batches * self.global_batch / train_s,
               "time/epoch_s": now - self._started, "time/eval_s": now - self._train_end if self._train_end else 0.0,
               "time/elapsed_s": self.wall_s + now - self._started}
        if pl_module.evaluation is not None:
            row["val/top1"], row["val/top5"] = pl_module.evaluation["top1"], pl_module.evaluation["top5"]
            row["val/images"] = pl_module.evaluation["images"]  # every rank's, each image once
            if self.to_target_s is None and row["val/top1"] >= self.target:
                self.to_target_s = row["time/elapsed_s"]
        self.history.append(row)
        self._epoch_end = now
        self._save(trainer)

    def metrics(self) -> Dict[str, float]:
        tops = [r["val/top1"] for r in self.history if "val/top1" in r]
        metrics = {"time/train_s": self.wall_s, "train/epochs": float(len(self.history))}
        if tops:
            metrics["val/best_top1"] = max(tops)
            metrics["val/images"] = [r["val/images"] for r in self.history if "val/images" in r][-1]
        if self.to_target_s is not None:
            metrics["time/to_target_s"] = self.to_target_s
        return metrics

    def series(self) -> Dict[str, List[tuple]]:
        """Each per-epoch metric as (epoch, value) pairs; val/* only for the epochs evaluated."""
        keys = ("train/loss", "train/nonfinite_steps", "train/skipped_steps", "train/loss_scale", "train/images_per_sec", "time/epoch_s", "time/eval_s", "time/checkpoint_s",
                "time/elapsed_s", "val/top1", "val/top5")
        return {k: [(int(r["epoch"]), r[k]) for r in self.history if k in r] for k in keys}


class Diverged(RuntimeError):
    """An epoch's loss was not finite: the run fails (failure=diverged), its checkpoint stays."""


def scaler_figures(trainer) -> Dict[str, float]:
    """The epoch's steps the loss scaler skipped and its scale at the epoch's end; none without a
    scaler. Read at the epoch's end, where the host waits for the device anyway."""
    read = read_scaler(getattr(trainer.precision_plugin, "scaler", None))
    figures = {} if read["loss_scale"] is None else {"train/loss_scale": read["loss_scale"]}
    if read["skipped"] is not None:
        figures["train/skipped_steps"] = float(sum(read["skipped"]))
    return figures


def checkpoint_to_load(cfg, out: Path) -> Optional[str]:
    """Where fit() starts: last.ckpt when resuming, else None (a fresh start).

    A requeued SLURM job also resumes from last.ckpt, the end of its last whole epoch, not from
    the mid-epoch hpc_ckpt_N.ckpt that Lightning saved on the signal: a DataLoader cannot skip
    the batches that epoch already saw, and only an epoch-end resume gives the uninterrupted
    run's result. Those files are removed, or Lightning would load them by itself (ckpt_path=None
    on SLURM); they served as this job's sign of a requeue (Requeued)."""
    if not resume.wanted(cfg):
        return None
    if resume.requeued():
        for stale in Path(out).glob("hpc_ckpt_*.ckpt"):
            stale.unlink(missing_ok=True)  # every rank tries; one removes it
    last = resume.last_checkpoint(out)
    return str(last) if last else None


def run_rank(cfg, out: Path, options) -> Optional[List[RankResult]]:
    """This rank's part of an accuracy run; rank 0 returns [its RankResult], the others None.
    options: the run's (components.Options), built once by rank.run_rank."""
    device_type = "cuda" if cfg.dist.accelerator == Accelerator.gpu else "cpu"
    set_math_mode(options.precision.tf32)
    pl.seed_everything(cfg.seed, verbose=False)
    world = world_size(cfg)
    global_batch = cfg.data.batch_size * world
    fused = optimizers.fused_default(cfg.optim, device_type)
    datamodule = options.data.build(cfg, endless=True)  # as pipelines.build
    model = AccuracyModule(cfg.model, cfg.optim, cfg.train, global_batch, datamodule.steps_per_epoch(world), fused)
    t = cfg.train
    record = EpochRecord(cfg.seed, t.epochs, t.eval_every_epochs, t.target_top1, global_batch, out)
    # One file, replaced every epoch (Lightning writes it whole, then renames it into place).
    # save_on_train_epoch_end: after validation and after EpochRecord closed the epoch.
    checkpoints = ModelCheckpoint(dirpath=out / resume.CHECKPOINT_DIR, filename=Path(resume.LAST).stem,
                                  save_top_k=1, enable_version_counter=False, save_on_train_epoch_end=True)
    trainer = pl.Trainer(**trainer_args(cfg, device_type, out, options, requeue=True),
                         max_epochs=t.epochs, check_val_every_n_epoch=t.eval_every_epochs,
                         callbacks=[record, EpochProgress(t.epochs, record), checkpoints],
                         enable_checkpointing=True)
    skip_sigterm_broadcast(trainer)
    fit_started = time.time()
    try:
        trainer.fit(model, datamodule=datamodule, ckpt_path=checkpoint_to_load(cfg, out))
    except BaseException:
        # SLURM stops a job it requeues (SIGTERM, then SIGKILL): whatever that broke (a DataLoader
        # worker, a collective) is no failure once Lightning saved its requeue checkpoint.
        saved = resume.hpc_checkpoint(out)
        if saved is not None and saved.stat().st_mtime >= fit_started:
            raise Requeued(str(saved)) from None
        raise
    if not trainer.is_global_zero:
        return None
    zero = RankResult(rank=0, node_rank=trainer.node_rank, local_rank=trainer.local_rank,
                      hostname=socket.gethostname(), pid=os.getpid(), windows=[], batch_size=cfg.data.batch_size,
                      env_tags={**software_tags(), **gpu_tags(device_type),
                                "accelerator": device_type},
                      metrics=record.metrics(), series=record.series())
    return [zero]
