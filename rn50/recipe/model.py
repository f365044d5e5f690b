"""ResNet classifier trained with cross-entropy and optim.name's optimizer, as torchvision builds it."""

import pytorch_lightning as pl
import torch
import torchvision
from torch import nn

from rn50.recipe import optimizers
from rn50.options.compilation import compile_mode, configure_inductor


def build_network(arch: str, num_classes: int, channels_last: bool) -> nn.Module:
    net = getattr(torchvision.models, arch)(weights=None, num_classes=num_classes)
    return net.to(memory_format=torch.channels_last) if channels_last else net


class ResNetModule(pl.LightningModule):
    def __init__(self, model_cfg, optim_cfg, fused: bool):
        super().__init__()
        self.net = build_network(model_cfg.arch.value, model_cfg.num_classes, model_cfg.channels_last)
        mode = compile_mode(model_cfg)
        if mode is not None:  # model.compile, or model.cuda_graphs (reduce-overhead)
            configure_inductor(model_cfg.autotune_pointwise, model_cfg.autotune_coordinate_descent)
            self.net = torch.compile(self.net, mode=mode)
        self.optim_cfg, self.fused = optim_cfg, fused
        self.criterion = nn.CrossEntropyLoss()

    def training_step(self, batch, batch_idx):
        images, labels = batch
        return self.criterion(self.net(images), labels)

    def configure_optimizers(self):
        return optimizers.for_network(self.net, self.optim_cfg, self.fused)
