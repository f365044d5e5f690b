"""The smallest Lightning module that trains: for tests of what a fit prints, not what it measures."""

import pytorch_lightning as pl
import torch


class Tiny(pl.LightningModule):
    def __init__(self, samples: int = 16):
        super().__init__()
        self.layer = torch.nn.Linear(4, 2)
        self.samples = samples

    def training_step(self, batch, batch_idx):
        return self.layer(batch).sum()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def train_dataloader(self):
        return torch.utils.data.DataLoader(torch.randn(self.samples, 4), batch_size=2)
