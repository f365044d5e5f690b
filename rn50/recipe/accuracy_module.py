"""train=accuracy's LightningModule: the ResNet trained with the recipe's loss, optimizer and
learning-rate schedule, and evaluated on the validation set for top-1 and top-5."""

from typing import Dict, NamedTuple, Optional

import torch
from torch import nn

from rn50.recipe import accuracy, optimizers, schedule
from rn50.recipe.model import ResNetModule


class EpochLoss(NamedTuple):
    mean: float
    nonfinite_steps: int
    healthy: bool


class AccuracyModule(ResNetModule):
    """ResNetModule with label smoothing, the recipe's optimizer and schedule, and validation.

    The training loss is summed on the device (no sync per step); `epoch_loss` and `evaluation`
    hold what the last epoch and evaluation gave, reduced over every rank."""

    def __init__(self, model_cfg, optim_cfg, train_cfg, global_batch: int, steps_per_epoch: int, fused: bool):
        super().__init__(model_cfg, optim_cfg, fused)
        self.train_cfg, self.global_batch, self.steps_per_epoch = train_cfg, global_batch, steps_per_epoch
        self.criterion = nn.CrossEntropyLoss(label_smoothing=train_cfg.label_smoothing)
        self._loss_sum: Optional[torch.Tensor] = None
        self._last_loss: Optional[torch.Tensor] = None
        self._counts: Optional[torch.Tensor] = None
        self.evaluation: Optional[Dict[str, float]] = None

    def training_step(self, batch, batch_idx):
        loss = super().training_step(batch, batch_idx)
        value = loss.detach().double()
        finite = torch.isfinite(value)
        # The sum of the finite losses, their count, and the others' count: an overflowing step
        # that the scaler skips is counted, not averaged into NaN.
        step = torch.stack([torch.where(finite, value, torch.zeros_like(value)), finite.double(), (~finite).double()])
        self._loss_sum = step if self._loss_sum is None else self._loss_sum + step
        self._last_loss = value
        return loss

    def epoch_loss(self) -> EpochLoss:
        """The epoch's mean finite training loss over every rank's steps, how many steps' losses
        were not finite, and whether it ended trained: its last loss and every weight finite on
        every rank. Starts the next sum; one wait for the device, at the epoch's end."""
        healthy = torch.isfinite(self._last_loss) & torch.stack([torch.isfinite(p).all() for p in self.parameters()]).all()
        total = self.trainer.strategy.reduce(torch.cat([self._loss_sum, (~healthy).double().reshape(1)]),
                                             reduce_op="sum").tolist()
        self._loss_sum = None
        mean = total[0] / total[1] if total[1] else float("nan")
        return EpochLoss(mean, int(total[2]), healthy=total[3] == 0 and total[1] > 0)

    def on_validation_epoch_start(self):
        self._counts = None
        accuracy.average_running_stats(self.net)  # every rank evaluates one model

    def on_train_epoch_end(self):
        # Again at every epoch's end, validated or not: Lightning saves the checkpoint after this hook, so
        # it holds the ranks' mean, and a resumed run goes on from what an uninterrupted one has.
        accuracy.average_running_stats(self.net)

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
        # Weight decay and LARS's adaptation leave batch norm and biases out (the recipe's groups).
        optimizer = optimizers.build(optimizers.param_groups(self.net, self.optim_cfg.weight_decay),
                                     self.optim_cfg, self.fused, lr=lr)
        # Not Lightning's estimated_stepping_batches: it builds the training iterator before a
        # resumed run's epoch is restored, and that epoch would replay the first one's data.
        sched = schedule.scheduler(optimizer, self.steps_per_epoch, self.train_cfg.lr_warmup_epochs,
                                   self.train_cfg.epochs)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": sched, "interval": "step"}}
