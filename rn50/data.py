"""Input pipelines. synthetic: one random batch made on the device and yielded forever."""

import itertools

import pytorch_lightning as pl
import torch


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
