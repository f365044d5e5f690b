"""Real-data pipelines on the CPU in this process: imagefolder and DALI's host path, sharding, tree
checks, and epoch ends inside the measured window (runs of python -m rn50: tests/e2e/test_data_runs.py)."""

import os
import signal
import sys
from types import SimpleNamespace

import pytest
import pytorch_lightning as pl
import torch

from helpers.images import REAL, make_tree
from rn50.options import pipelines
from rn50.options.checks import count_train_images
from rn50.options.components import Options
from rn50.data.modules import JOB_SIGNALS, ImageFolderData
from rn50.errors import ConfigError
from rn50.rank.trainer import build_trainer
from rn50.point.validate import validate
from rn50.rank.throughput import ThroughputCallback
from rn50.measure.timing import throughput_metrics


def test_two_processes_read_disjoint_shards(image_tree):
    seen = []
    for rank in (0, 1):
        dm = ImageFolderData(str(image_tree), batch_size=2, image_size=32, num_workers=1, channels_last=True, seed=0)
        dm.trainer = SimpleNamespace(world_size=2, global_rank=rank,
                                     strategy=SimpleNamespace(root_device=torch.device("cpu")))
        loader = dm.train_dataloader()
        files = {loader.dataset.samples[i][0] for i in loader.sampler}
        assert len(files) == 6  # 12 images, half each
        seen.append(files)
    assert not seen[0] & seen[1]


def test_workers_of_several_ranks_start_where_a_fork_cannot_deadlock(image_tree):
    """Before Python 3.12 a fork beside gloo's or NCCL's threads can deadlock the child (cpython
    gh-112275): the workers of both loaders of a rank of several are spawned there; a lone
    rank forks them. That they deliver batches, the imagefolder and train=accuracy runs of tests/e2e show."""
    for world, expected in ((2, "spawn" if sys.version_info < (3, 12) else None), (1, None)):
        dm = ImageFolderData(str(image_tree), batch_size=2, image_size=32, num_workers=1, channels_last=False, seed=0,
                             validate=True)
        dm.trainer = SimpleNamespace(world_size=world, global_rank=0, fit_loop=SimpleNamespace(
            epoch_progress=SimpleNamespace(current=SimpleNamespace(processed=0))),
            strategy=SimpleNamespace(root_device=torch.device("cpu")))
        for loader in (dm.train_dataloader(), dm.val_dataloader()):
            context = loader.multiprocessing_context
            assert (context.get_start_method() if context else None) == expected, world


@pytest.mark.parametrize("world", [1, pytest.param(2, marks=pytest.mark.slow)])  # forked workers; spawned before 3.12
def test_workers_leave_a_jobs_signals_to_their_rank(image_tree, tmp_path, world):
    """SLURM sends USR1 (requeue) and USR2 (time limit) to every process of a job step: a worker
    neither runs the rank's handler (a forked worker inherits it) nor dies of them (a spawned one
    would), while it starts (a spawned worker imports torch for seconds) or after."""
    handled, rank = tmp_path / "handled", os.getpid()

    def rank_handler(signum, frame):  # Lightning's saves a checkpoint and requeues the job
        if os.getpid() != rank:
            handled.write_text(str(os.getpid()))

    previous = [signal.signal(s, rank_handler) for s in JOB_SIGNALS]
    try:
        dm = ImageFolderData(str(image_tree), batch_size=2, image_size=32, num_workers=1, channels_last=False,
                             seed=0, endless=True)
        dm.trainer = SimpleNamespace(world_size=world, global_rank=0,
                                     strategy=SimpleNamespace(root_device=torch.device("cpu")))
        batches = iter(dm.train_dataloader())
        (worker,) = batches._workers
        for when in ("starting", "started"):
            for s in JOB_SIGNALS:
                os.kill(worker.pid, s)
            for _ in range(8):  # past what it had fetched ahead: it made batches after the signals
                next(batches)
            assert worker.is_alive() and not handled.exists(), when
        assert signal.pthread_sigmask(signal.SIG_BLOCK, []) & set(JOB_SIGNALS) == set()  # the rank's, unblocked
        del batches
    finally:
        for s, handler in zip(JOB_SIGNALS, previous):
            signal.signal(s, handler)


def test_tree_checks(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        count_train_images(str(tmp_path / "nope"), 4)
    (tmp_path / "imagenet.tar").write_bytes(b"not a folder")
    with pytest.raises(ConfigError, match=rf"^data\.root={tmp_path}/imagenet\.tar is a file, not a folder; point it at "
                                          r"the folder that holds train/<class>/\*\.JPEG$"):
        count_train_images(str(tmp_path / "imagenet.tar"), 4)
    with pytest.raises(ConfigError, match="no train/ folder"):
        count_train_images(str(tmp_path), 4)
    (tmp_path / "train").mkdir()
    with pytest.raises(ConfigError, match="no class folders"):
        count_train_images(str(tmp_path), 4)
    (tmp_path / "train" / "empty").mkdir()
    with pytest.raises(ConfigError, match="class folder .*empty has no images"):
        count_train_images(str(tmp_path), 4)
    (tmp_path / "train" / "empty").rmdir()
    make_tree(tmp_path, classes=2, per_class=2)
    with pytest.raises(ConfigError, match="4 training images, fewer than one global batch of 8"):
        count_train_images(str(tmp_path), 8)
    assert count_train_images(str(tmp_path), 4) == 4


class ChannelMeans(pl.LightningModule):
    """A linear layer on each image's channel means: a cheap step, so the data path is what runs."""

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(3, 2)
        self.seen = []  # (Lightning's epoch, batch size) of each step

    def training_step(self, batch, batch_idx):
        images, labels = batch
        self.seen.append((self.current_epoch, len(labels)))
        return torch.nn.functional.cross_entropy(self.layer(images.float().mean(dim=(2, 3))), labels % 2)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


@pytest.mark.parametrize("endless", [True, False], ids=["endless", "epochs"])
@pytest.mark.parametrize("pipeline", ["imagefolder", "dali"])
def test_epoch_ends_inside_the_measured_window(tmp_path, image_tree, compose_cfg, monkeypatch, pipeline, endless):
    if pipeline == "dali":
        pytest.importorskip("nvidia.dali")
    # 12 images in batches of 4: an epoch every 3 steps. 2 warm-up steps, then a window of 7 steps
    # (steps 2-8) with the epoch ends after steps 2, 5 and 8 inside it.
    cfg = validate(compose_cfg([*REAL, "precision=fp32", f"data={pipeline}", f"data.root={image_tree}",
                                "bench.warmup_steps=2", "bench.steps=7"]))
    dm = pipelines.build(cfg, endless=endless)
    # imagefolder: each DataLoader pass (Lightning's epoch); dali: each pipeline built.
    starts = spy(monkeypatch, torch.utils.data.DataLoader, "__iter__") if pipeline == "imagefolder" \
        else spy(monkeypatch, type(dm), "_pipeline")
    throughput = ThroughputCallback(cfg.bench, cfg.telemetry, "cpu", cfg.data.batch_size)
    trainer = build_trainer(cfg, "cpu", [throughput], throughput.timer.total_steps, tmp_path, Options.of(cfg))
    model = ChannelMeans()
    trainer.fit(model, datamodule=dm)
    (window,) = throughput.timer.windows
    assert len(window.step_ms) == 7 and [size for _, size in model.seen] == [4] * 9
    assert throughput_metrics([window], 4, 1)["throughput/images_per_sec"] == pytest.approx(4 * 7 / window.seconds)
    # Endless, Lightning never ends an epoch, so the loader is never restarted; with epochs it
    # is, once per epoch, but the DALI pipeline and its prefetched batches stay.
    epochs = [epoch for epoch, _ in model.seen]
    assert epochs == ([0] * 9 if endless else [0, 0, 0, 1, 1, 1, 2, 2, 2])
    assert len(starts) == (1 if endless or pipeline == "dali" else 3)


def spy(monkeypatch, cls, name) -> list:
    """Record every call of cls.name in the returned list."""
    calls, original = [], getattr(cls, name)

    def recorded(*args, **kwargs):
        calls.append(args[1:])
        return original(*args, **kwargs)

    monkeypatch.setattr(cls, name, recorded)
    return calls
