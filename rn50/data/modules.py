"""Input pipelines: synthetic (a batch kept on the device), imagefolder (torchvision), dali (rn50/data/dali.py)."""

import functools
import itertools
import multiprocessing
import signal
import sys
from pathlib import Path

import pytorch_lightning as pl
import torch
from PIL import Image, UnidentifiedImageError
from torch.utils.data import DataLoader, DistributedSampler, Sampler, Subset
from torchvision import datasets, transforms

from rn50.recipe.accuracy import shard

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


class SyntheticData(pl.LightningDataModule):
    """A GPU-resident batch: Lightning's move to the device is a no-op, so no copy per step."""

    def __init__(self, batch_size: int, image_size: int, num_classes: int, channels_last: bool, seed: int):
        super().__init__()
        self.shape = (batch_size, 3, image_size, image_size)
        self.num_classes, self.channels_last, self.seed = num_classes, channels_last, seed

    def train_dataloader(self):
        device = self.trainer.strategy.root_device
        gen = torch.Generator().manual_seed(self.seed + self.trainer.global_rank)
        images = torch.randn(self.shape, generator=gen).to(device)
        if self.channels_last:
            images = images.contiguous(memory_format=torch.channels_last)
        labels = torch.randint(0, self.num_classes, self.shape[:1], generator=gen).to(device)
        return itertools.repeat((images, labels))


def load_rgb(path: str) -> Image.Image:
    """ImageFolder's loader; a file that cannot be decoded is named, with what to do about it."""
    with open(path, "rb") as f:
        try:
            return Image.open(f).convert("RGB")
        except OSError as exc:  # PIL's errors for a truncated or damaged file (UnidentifiedImageError is one)
            reason = "cannot identify image file" if isinstance(exc, UnidentifiedImageError) else str(exc)
            raise RuntimeError(f"corrupt image {path} ({reason}); remove or replace it") from None


def worker_context(num_workers: int, world: int):
    """How a DataLoader's workers start. CPython before 3.12 can deadlock a forked child in os.fork()
    itself (cpython gh-112275): the runtime's thread-state lock, held by another thread at the
    fork, is taken again before it is reset. A rank of several forks its workers after its process
    group's threads (gloo, NCCL) exist, and those take that lock when they call into Python: a
    requeued two-rank accuracy run on the test cluster hung for good in its first step that way.
    There the workers are spawned: each starts a fresh interpreter and imports torch (seconds, at
    start-up, and at each epoch of a train=accuracy run, whose workers restart). Not a forkserver:
    its workers' parent is the server, so a worker outlives a rank that was killed (torch's worker
    watches its parent), and the server outlives its workers. A lone rank has no such threads, and
    3.12 fixed the bug (its backports to late 3.9-3.11 releases are not relied on): fork, the
    fastest start (None)."""
    if num_workers == 0 or world == 1 or sys.version_info >= (3, 12):
        return None
    return multiprocessing.get_context("spawn")


# The signals that stop a SLURM job: USR1 ahead of a requeue (Lightning's), submitit's USR2 at the time limit.
JOB_SIGNALS = (signal.SIGUSR1, signal.SIGUSR2)


class RankLoader(DataLoader):
    """A DataLoader whose workers leave the job's signals to their rank. SLURM signals every process
    of a job step, workers included, and only the rank may act on JOB_SIGNALS. A forked worker
    inherits the rank's handlers, so Lightning's saved a checkpoint and ran `scontrol requeue` in
    each worker too (three "Handling auto-requeue signal" lines per signal on the test cluster), and
    a late one could requeue the job's next start; a spawned worker died of them, failing its rank's
    DataLoader. So the workers start with the signals blocked (a mask survives fork and exec),
    and each ignores them before it unblocks them (ignore_job_signals): one that came meanwhile is
    dropped. Only the starting thread blocks them, so the rank acts on its own at once: the kernel
    hands them to the rank's other threads, and Python runs the handler in the main thread anyway."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, worker_init_fn=ignore_job_signals, **kwargs)  # the block's other half

    def _get_iterator(self):  # where torch starts the workers: each epoch's, or persistent ones once
        held = signal.pthread_sigmask(signal.SIG_BLOCK, [])  # as it is: put back whatever a handler raises
        try:
            signal.pthread_sigmask(signal.SIG_BLOCK, JOB_SIGNALS)
            return super()._get_iterator()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)


def ignore_job_signals(worker_id: int) -> None:
    """A RankLoader worker's start (worker_init_fn): JOB_SIGNALS ignored, then unblocked."""
    for signum in JOB_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, JOB_SIGNALS)


class Endless(Sampler):
    """A DistributedSampler's epochs one after another: the DataLoader never runs out, so its
    workers keep decoding ahead across epoch ends instead of idling until the next epoch's
    indices arrive (a stall at every epoch end of a small data set)."""

    def __init__(self, sampler: DistributedSampler):
        self.sampler = sampler

    def __iter__(self):
        for epoch in itertools.count():
            self.sampler.set_epoch(epoch)  # what Lightning does at each epoch's start
            yield from self.sampler


def eval_resize(image_size: int) -> int:
    """The shorter side validation images are resized to before the center crop: 256 for 224."""
    return round(image_size * 256 / 224)


class ImageFolderData(pl.LightningDataModule):
    """torchvision ImageFolder on root/train, decoded by DataLoader workers, one shard per rank.
    endless: one stream of batches across epochs (Lightning never ends an epoch); otherwise a
    plain DataLoader, one pass per epoch.

    validate=True (train=accuracy, never endless) adds root/val, resized and center-cropped, each
    image on exactly one rank; its training workers then start afresh every epoch, so that
    augmentation depends on the epoch's seed alone and a resumed run draws what an uninterrupted
    one would."""

    def __init__(self, root: str, batch_size: int, image_size: int, num_workers: int,
                 channels_last: bool, seed: int, endless: bool = False, validate: bool = False):
        super().__init__()
        self.root, self.batch_size, self.num_workers = Path(root), batch_size, num_workers
        self.channels_last, self.seed = channels_last, seed
        self.endless, self.validate = endless and not validate, validate
        self.eval_transform = transforms.Compose([
            transforms.Resize(eval_resize(image_size)),
            transforms.CenterCrop(image_size),
            transforms.ToTensor(),
            transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD),
        ])
        self.transform = transforms.Compose([
            transforms.RandomResizedCrop(image_size),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD),
        ])

    @functools.cached_property
    def train_set(self) -> datasets.ImageFolder:
        return datasets.ImageFolder(self.root / "train", self.transform, loader=load_rgb)

    def steps_per_epoch(self, world: int) -> int:
        """Full batches per rank in an epoch: DistributedSampler and DataLoader both drop the rest."""
        return len(self.train_set) // world // self.batch_size

    def train_dataloader(self):
        dataset = self.train_set
        sampler = DistributedSampler(dataset, num_replicas=self.trainer.world_size,
                                     rank=self.trainer.global_rank, seed=self.seed, drop_last=True)
        generator = None
        if self.validate:
            # Lightning draws the first epoch's order and worker seeds before it sets the sampler's
            # epoch (and before current_epoch counts a resumed run's epochs): a resumed run's first
            # epoch is not 0, so both are set for it here, from the count Lightning's sampler uses.
            epoch = self.trainer.fit_loop.epoch_progress.current.processed
            sampler.set_epoch(epoch)
            generator = self.generator = torch.Generator()
            self.seed_epoch(epoch)
        # Endless: a sampler without len() makes a DataLoader without one, which Lightning runs
        # as one epoch that never ends.
        return RankLoader(dataset, self.batch_size, sampler=Endless(sampler) if self.endless else sampler,
                          num_workers=self.num_workers,
                          multiprocessing_context=worker_context(self.num_workers, self.trainer.world_size),
                          pin_memory=self.trainer.strategy.root_device.type == "cuda",
                          persistent_workers=not self.validate, drop_last=True, generator=generator)

    def seed_epoch(self, epoch: int) -> None:
        """validate=True: the seed the epoch's DataLoader workers derive their augmentation from,
        a function of (seed, epoch, rank) alone; rn50/rank/training.py calls it as each epoch starts."""
        self.generator.manual_seed(self.seed * 1_000_003 + epoch * 1009 + self.trainer.global_rank)

    def val_dataloader(self):
        if not self.validate:
            return []
        dataset = datasets.ImageFolder(self.root / "val", self.eval_transform, loader=load_rgb)
        mine = Subset(dataset, shard(len(dataset), self.trainer.global_rank, self.trainer.world_size))
        return RankLoader(mine, self.batch_size, shuffle=False, num_workers=self.num_workers,
                          multiprocessing_context=worker_context(self.num_workers, self.trainer.world_size),
                          pin_memory=self.trainer.strategy.root_device.type == "cuda", drop_last=False)

    def on_after_batch_transfer(self, batch, dataloader_idx):
        images, labels = batch
        if self.channels_last:  # on the device, so the copy is a fast device-side one
            images = images.contiguous(memory_format=torch.channels_last)
        return images, labels
