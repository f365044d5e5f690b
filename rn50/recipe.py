"""train=accuracy's LightningModule: the ResNet trained with the recipe's loss, optimizer and
learning-rate schedule, and evaluated on the validation set for top-1 and top-5."""

from typing import Dict, List, Optional

import torch
from torch import nn

from rn50 import accuracy, schedule
from rn50.lars import LARS
from rn50.model import ResNetModule, build_optimizer
from rn50.schema import OptimName


def param_groups(net: nn.Module, weight_decay: float) -> List[Dict]:
    """Weight decay on convolution and linear weights only: batch-norm scales and shifts and every
    bias go without it, as in NVIDIA's recipe (decaying them only hurts accuracy)."""
    decay, no_decay = [], []
    for module in net.modules():
        for name, param in module.named_parameters(recurse=False):
            if isinstance(module, nn.modules.batchnorm._BatchNorm) or name == "bias":
                no_decay.append(param)
            else:
                decay.append(param)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def recipe_optimizer(net: nn.Module, optim, lr: float, fused: bool) -> torch.optim.Optimizer:
    groups = param_groups(net, optim.weight_decay)
    if optim.name == OptimName.lars:
        return LARS(groups, lr=lr, momentum=optim.momentum, trust=optim.lars_trust)
    return build_optimizer(groups, optim, fused, lr=lr)


class AccuracyModule(ResNetModule):
    """ResNetModule with label smoothing, the recipe's optimizer and schedule, and validation.

    The training loss is summed on the device (no sync per step); `epoch_loss` and `evaluation`
    hold what the last epoch and evaluation gave, reduced over every rank."""

    def __init__(self, model_cfg, optim_cfg, train_cfg, global_batch: int, steps_per_epoch: int, fused: bool):
        super().__init__(model_cfg, optim_cfg, fused)
        self.train_cfg, self.global_batch, self.steps_per_epoch = train_cfg, global_batch, steps_per_epoch
        self.criterion = nn.CrossEntropyLoss(label_smoothing=train_cfg.label_smoothing)
        self._loss_sum: Optional[torch.Tensor] = None
        self._counts: Optional[torch.Tensor] = None
        self.evaluation: Optional[Dict[str, float]] = None

    def training_step(self, batch, batch_idx):
        loss = super().training_step(batch, batch_idx)
        step = torch.stack([loss.detach().double(), torch.ones((), dtype=torch.float64, device=loss.device)])
        self._loss_sum = step if self._loss_sum is None else self._loss_sum + step
        return loss

    def epoch_loss(self) -> float:
        """The mean training loss of the epoch over every rank's steps; starts the next sum."""
        total = self.trainer.strategy.reduce(self._loss_sum, reduce_op="sum")
        self._loss_sum = None
        return (total[0] / total[1]).item()

    def on_validation_epoch_start(self):
        self._counts = None

    def validation_step(self, batch, batch_idx):
        images, labels = batch
        counts = accuracy.count_correct(self.net(images).float(), labels)
        self._counts = counts if self._counts is None else self._counts + counts

    def on_validation_epoch_end(self):
        mine = self._counts if self._counts is not None else torch.zeros(len(accuracy.TOP_K) + 1,
                                                                         dtype=torch.float64, device=self.device)
        self.evaluation = accuracy.fractions(accuracy.reduce_counts(mine))

    def configure_optimizers(self):
        lr = schedule.scaled_lr(self.optim_cfg.lr, self.global_batch)
        optimizer = recipe_optimizer(self.net, self.optim_cfg, lr, self.fused)
        # Not Lightning's estimated_stepping_batches: it builds the training iterator before a
        # resumed run's epoch is restored, and that epoch would replay the first one's data.
        sched = schedule.scheduler(optimizer, self.steps_per_epoch, self.train_cfg.lr_warmup_epochs,
                                   self.train_cfg.epochs)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": sched, "interval": "step"}}
