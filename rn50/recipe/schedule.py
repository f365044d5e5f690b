"""train=accuracy's learning rate: scaled linearly with the global batch, a linear warm-up,
then a cosine decay to 0, stepped every optimizer step (so the warm-up is smooth even when
an epoch is a few large steps)."""

import math

import torch

REFERENCE_BATCH = 256  # optim.lr is the rate for this many images per step (Goyal et al., 2017)


def scaled_lr(lr_per_256: float, global_batch: int) -> float:
    return lr_per_256 * global_batch / REFERENCE_BATCH


def lr_factor(step: int, warmup_steps: int, total_steps: int) -> float:
    """The fraction of the scaled rate at optimizer step `step` (0-based): (step+1)/warmup
    during the warm-up, then half a cosine from 1 down to 0 at total_steps."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    progress = (step - warmup_steps) / max(total_steps - warmup_steps, 1)
    return 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))


def scheduler(optimizer: torch.optim.Optimizer, steps_per_epoch: int, warmup_epochs: int,
              epochs: int) -> torch.optim.lr_scheduler.LambdaLR:
    """A LambdaLR over the optimizer's (already scaled) rates; Lightning steps it every step."""
    warmup, total = warmup_epochs * steps_per_epoch, epochs * steps_per_epoch
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: lr_factor(step, warmup, total))
