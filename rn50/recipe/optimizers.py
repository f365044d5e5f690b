"""The optimizers rn50 builds, each safe under a loss scaler: a step the scaler skips (its
gradients overflowed) leaves the weights and every piece of optimizer state as they were.

torch's fused SGD breaks that on its own. On its first step it makes the momentum buffers with
torch.empty and lets the kernel fill them; when a GradScaler skips that step inside the kernel
(found_inf), the buffers keep the uninitialized memory, and the next finite step moves the weights
by it (8.5e24 instead of 0.1 on a CPU). amp runs then skipped every later step with a NaN loss
(rn50 issue 27; LibreYOLO #771 saw the same). So rn50's optimizers start with zero momentum
buffers: with dampening 0, momentum * 0 + grad is exactly the clone of grad a first step takes, so
the arithmetic is unchanged and no step is ever "first". Skipped steps stay on the device (no
host sync): fused SGD and LARS take the scaler's found_inf into their step.
"""

from typing import Dict, Iterable, List

import torch
from torch import nn

from rn50.config.schema import OptimName


def fused_default(optim, device_type: str) -> bool:
    """optim.fused, where null means fused SGD on GPUs (its kernel saves a launch per tensor) and
    foreach SGD on CPUs; LARS has no fused kernel (the schema refuses optim.fused=true with it)."""
    if optim.name == OptimName.lars:
        return False
    return optim.fused if optim.fused is not None else device_type == "cuda"


def zero_momentum(optimizer: torch.optim.Optimizer) -> None:
    """A zero momentum buffer for every parameter of a group with momentum that has none yet."""
    for group in optimizer.param_groups:
        if group.get("momentum", 0) == 0:
            continue
        for p in group["params"]:
            state = optimizer.state[p]
            if state.get("momentum_buffer") is None:
                state["momentum_buffer"] = torch.zeros_like(p, memory_format=torch.preserve_format)


class SGD(torch.optim.SGD):
    """torch's SGD (fused or foreach) with its momentum buffers made as zeros up front, also after
    a checkpoint's state is loaded; see the module's docstring."""

    def __init__(self, params, **options):
        if options.get("dampening", 0) != 0:  # zeros stand for a first step only without dampening
            raise ValueError("rn50's SGD keeps dampening at 0")
        super().__init__(params, **options)
        zero_momentum(self)

    def load_state_dict(self, state_dict) -> None:
        super().load_state_dict(state_dict)
        zero_momentum(self)


class LARS(torch.optim.Optimizer):
    """LARS (You, Gitman and Ginsburg, 2017): SGD with momentum whose step for each weight tensor
    is scaled by trust * ||w|| / (||g|| + weight_decay * ||w||), so that large global batches
    (MLPerf's ResNet-50 runs use 3,000 and more) train with one learning rate for every layer.

    Written here rather than taken from timm: it is these few lines, and timm would add a
    dependency (and its own torch pin) to every install for one class. Tensors in a parameter
    group with weight_decay 0 (batch norm and biases: param_groups) are not adapted, as in
    MLPerf's reference implementations.

    Under a GradScaler it unscales and skips on the device, as torch's fused optimizers do
    (`_step_supports_amp_scaling`): the scaler hands it grad_scale and found_inf instead of reading
    found_inf on the host, which would sync every step. A skipped step leaves weights and momentum
    as they were (the module's docstring says why the momentum starts at zero).
    """

    _step_supports_amp_scaling = True

    def __init__(self, params, lr: float, momentum: float = 0.9, weight_decay: float = 0.0,
                 trust: float = 0.001, eps: float = 1e-9):
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay, trust=trust, eps=eps))
        zero_momentum(self)

    def load_state_dict(self, state_dict) -> None:
        super().load_state_dict(state_dict)
        zero_momentum(self)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        # Set by GradScaler.step for optimizers that unscale themselves; absent without a scaler.
        grad_scale, found_inf = getattr(self, "grad_scale", None), getattr(self, "found_inf", None)
        for group in self.param_groups:
            decay, adapt = group["weight_decay"], group["weight_decay"] != 0
            for p in group["params"]:
                if p.grad is None:
                    continue
                raw = p.grad if grad_scale is None else p.grad / grad_scale.to(p.grad.device)
                grad = raw.add(p, alpha=decay) if decay else raw.clone()
                if adapt:
                    w_norm, g_norm = torch.linalg.vector_norm(p), torch.linalg.vector_norm(raw)
                    ratio = group["trust"] * w_norm / (g_norm + decay * w_norm + group["eps"])
                    # A zero weight or gradient norm (a fresh layer) leaves the step as SGD's.
                    grad.mul_(torch.where((w_norm > 0) & (g_norm > 0), ratio, torch.ones_like(ratio)))
                buf = self.state[p]["momentum_buffer"]
                if found_inf is None:
                    buf.mul_(group["momentum"]).add_(grad)
                    p.add_(buf, alpha=-group["lr"])
                    continue
                skip = found_inf.to(p.device) > 0
                buf.copy_(torch.where(skip, buf, buf * group["momentum"] + grad))
                p.copy_(torch.where(skip, p, p - group["lr"] * buf))
        return loss


def param_groups(net: nn.Module, weight_decay: float) -> List[Dict]:
    """Weight decay on convolution and linear weights only: batch-norm scales and shifts and every
    bias go without it, as in NVIDIA's recipe (decaying them only hurts accuracy); LARS leaves
    those tensors unadapted, as MLPerf's reference does."""
    decay, no_decay = [], []
    for module in net.modules():
        for name, param in module.named_parameters(recurse=False):
            if isinstance(module, nn.modules.batchnorm._BatchNorm) or name == "bias":
                no_decay.append(param)
            else:
                decay.append(param)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def build(params: Iterable, optim, fused: bool, lr=None) -> torch.optim.Optimizer:
    """optim.name's optimizer at optim.lr, or at lr (train=accuracy's rate scaled with the batch);
    param groups that set their own weight_decay keep it."""
    lr = optim.lr if lr is None else lr
    if optim.name == OptimName.lars:
        return LARS(params, lr=lr, momentum=optim.momentum, weight_decay=optim.weight_decay, trust=optim.lars_trust)
    return SGD(params, lr=lr, momentum=optim.momentum, weight_decay=optim.weight_decay, fused=fused)


def for_network(net: nn.Module, optim, fused: bool, lr=None) -> torch.optim.Optimizer:
    """A throughput run's optimizer: SGD on every parameter as it always was; LARS with the
    recipe's groups, which it needs to leave batch norm and biases unadapted."""
    params = param_groups(net, optim.weight_decay) if optim.name == OptimName.lars else net.parameters()
    return build(params, optim, fused, lr)
