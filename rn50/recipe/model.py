"""ResNet classifier trained with cross-entropy and optim.name's optimizer, as torchvision builds it."""

import functools

import pytorch_lightning as pl
import torch
import torch._dynamo.config as dynamo
import torch._inductor.config as inductor  # Lightning imports inductor anyway: this costs a rank nothing more
import torchvision
from lightning_fabric.utilities.throughput import measure_flops
from torch import nn

from rn50.config.compilation import compile_mode
from rn50.recipe import optimizers


def build_network(arch: str, num_classes: int, channels_last: bool) -> nn.Module:
    net = getattr(torchvision.models, arch)(weights=None, num_classes=num_classes)
    return net.to(memory_format=torch.channels_last) if channels_last else net


def configure_compile(autotune_pointwise: bool, autotune_coordinate_descent: bool, ddp: str) -> None:
    """torch.compile's process-wide settings for the next compile: inductor's kernel tuning, and how
    dynamo meets DDP (model.compile_ddp; read when the first step compiles). Set either way, since a
    warm rank (rn50/launcher/pool.py) compiles the next sweep point in the same process."""
    inductor.max_autotune_pointwise = bool(autotune_pointwise)
    inductor.coordinate_descent_tuning = bool(autotune_coordinate_descent)
    dynamo.optimize_ddp = ddp


@functools.lru_cache(maxsize=None)  # a warm rank counts each network once
def flops_per_image(arch: str, num_classes: int, image_size: int) -> float:
    """Forward plus backward FLOPs of one image, counted by Lightning on the meta device."""
    batch = 2
    with torch.device("meta"):
        net = getattr(torchvision.models, arch)(weights=None, num_classes=num_classes)
        images = torch.empty(batch, 3, image_size, image_size)
    return measure_flops(net, lambda: net(images), lambda out: out.sum()) / batch


class ResNetModule(pl.LightningModule):
    def __init__(self, model_cfg, optim_cfg, fused: bool):
        super().__init__()
        self.net = build_network(model_cfg.arch.value, model_cfg.num_classes, model_cfg.channels_last)
        mode = compile_mode(model_cfg)
        if mode is not None:  # model.compile, or model.cuda_graphs (reduce-overhead)
            configure_compile(model_cfg.autotune_pointwise, model_cfg.autotune_coordinate_descent,
                              model_cfg.compile_ddp.value)
            self.net = torch.compile(self.net, mode=mode)
        self.optim_cfg, self.fused = optim_cfg, fused
        self.criterion = nn.CrossEntropyLoss()

    def training_step(self, batch, batch_idx):
        images, labels = batch
        return self.criterion(self.net(images), labels)

    def configure_optimizers(self):
        return optimizers.for_network(self.net, self.optim_cfg, self.fused)
