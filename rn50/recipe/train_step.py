"""rn50's training step without a framework: the network, precision, layout and optimizer of a
run as one callable. The bare loop (rn50/tools/baseline.py) measures what the framework costs with it;
the batch search (rn50/rank/batch_search.py) probes batch sizes with it."""

import inspect
from dataclasses import dataclass, field
from typing import Optional, Tuple

import torch
from torch import nn

from rn50.config.schema import OptimConfig
from rn50.recipe.model import build_network
from rn50.recipe.optimizers import for_network, fused_default
from rn50.recipe.precision import GradScaler, StaticGradScaler

# The autocast dtype of rn50's built-in precisions (conf/precision/) that have one.
AUTOCAST = {"amp": torch.float16, "amp_static": torch.float16, "bf16": torch.bfloat16}


@dataclass
class TrainStep:
    """One training step with rn50's settings and no framework: forward under autocast,
    cross-entropy, backward (loss-scaled for fp16), fused SGD. Call it with a batch."""

    net: nn.Module
    """The torchvision network, whose parameters the optimizer holds."""
    model: nn.Module
    """What the forward pass calls: the network, wrapped in DDP and compiled where asked."""
    optimizer: torch.optim.Optimizer
    scaler: Optional[torch.amp.GradScaler]
    dtype: Optional[torch.dtype]
    """The autocast dtype; None runs the forward in fp32/tf32."""
    device: torch.device
    channels_last: bool
    image_size: int
    num_classes: int
    criterion: nn.Module = field(default_factory=nn.CrossEntropyLoss)

    def batch(self, batch_size: int, seed: int = 0) -> Tuple[torch.Tensor, torch.Tensor]:
        """A random batch made on the device, as data=synthetic makes it."""
        gen = torch.Generator().manual_seed(seed)
        images = torch.randn(batch_size, 3, self.image_size, self.image_size, generator=gen).to(self.device)
        if self.channels_last:
            images = images.contiguous(memory_format=torch.channels_last)
        return images, torch.randint(0, self.num_classes, (batch_size,), generator=gen).to(self.device)

    def __call__(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """One step; its loss, detached (reading it waits for the device)."""
        with torch.autocast(self.device.type, dtype=self.dtype, enabled=self.dtype is not None):
            loss = self.criterion(self.model(images), labels)
        self.optimizer.zero_grad(set_to_none=True)
        if self.scaler is None:
            loss.backward()
            self.optimizer.step()
        else:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        return loss.detach()


def buffer_sync(every_forward: bool) -> dict:
    """DDP's keyword for whether it copies rank 0's buffers to every rank at each forward (rn50's
    dist.broadcast_buffers): forward_sync_buffers where torch has it (torch 2.13 and later deprecate
    broadcast_buffers for it), else broadcast_buffers. Off, the first still copies them once when DDP is
    built, the second not: batch norm's start from the same values on every rank either way."""
    keys = inspect.signature(torch.nn.parallel.DistributedDataParallel.__init__).parameters
    return {"forward_sync_buffers" if "forward_sync_buffers" in keys else "broadcast_buffers": every_forward}


def build_train_step(arch: str, precision, device: torch.device, *, num_classes: int = 1000,
                     image_size: int = 224, channels_last: bool = True, compile_mode: Optional[str] = None,
                     fused: Optional[bool] = None, loss_scale: float = 1024.0, optim=None,
                     ddp: bool = False, broadcast_buffers: bool = False) -> TrainStep:
    """rn50's network, precision, layout and optimizer as a bare step. precision is a built-in
    precision's name (fp32, tf32, amp, amp_static, bf16), or a run's precision object (rn50/options/precision.py), whose autocast and scaler it takes.
    compile_mode None runs eager; fused None follows optim.fused as a run does
    (optimizers.fused_default); ddp wraps the network for an
    initialized process group, with broadcast_buffers as rn50's dist.broadcast_buffers."""
    net = build_network(arch, num_classes, channels_last).to(device)
    model = net
    if ddp:
        model = torch.nn.parallel.DistributedDataParallel(
            net, device_ids=[device.index] if device.type == "cuda" else None, gradient_as_bucket_view=True,
            **buffer_sync(broadcast_buffers))
    if compile_mode is not None:
        model = torch.compile(model, mode=compile_mode)
    optim = optim or OptimConfig()
    fused = fused_default(optim, device.type) if fused is None else fused
    optimizer = for_network(net, optim, fused=fused)
    if not isinstance(precision, str):
        dtype = getattr(torch, precision.autocast) if precision.autocast else None
        scaler = precision.scaler(device.type)
    else:
        dtype, scaler = AUTOCAST.get(precision), None
        if precision == "amp":
            scaler = GradScaler(device.type)
        elif precision == "amp_static":
            scaler = StaticGradScaler(device.type, init_scale=loss_scale)
    return TrainStep(net, model, optimizer, scaler, dtype, device, channels_last, image_size, num_classes)
