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

from collections import defaultdict
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

    Written here rather than taken from timm, which would add a dependency (and its own torch pin)
    to every install for one class. Tensors in a parameter group with weight_decay 0 (batch norm
    and biases: param_groups) are not adapted, as in MLPerf's reference implementations; a zero
    weight or gradient norm (a fresh layer) leaves a tensor's step as SGD's.

    Multi-tensor, as MLPerf's LARS is: one tensor at a time, a ResNet-50 step (161 tensors) took
    over a thousand CUDA kernels; this one a few dozen, in a fraction of the time
    (benchmarks/probes/lars_step.py; the figures in docs/benchmarks.md). Each group's update is built in one flat buffer that holds a view of each parameter's shape and strides, so that
    torch._foreach_* ops (a launch or a few per list) and single kernels over the buffer do the
    work; a foreach kernel takes its tensors in chunks, so launches grow with the chunks, not with
    each tensor. Two things need the buffer: a foreach op multiplies a list by one scalar or by tensors
    of the same shapes, not by a ratio per tensor (0-d tensors cost a launch each), and a skipped
    step must keep an overflow's NaN out of the weights, which no arithmetic does (0 * NaN is NaN),
    only a select such as masked_fill.

    Under a GradScaler it unscales and skips on the device, as torch's fused optimizers do
    (`_step_supports_amp_scaling`): the scaler hands it grad_scale and found_inf instead of reading
    found_inf on the host, which would sync every step. A skipped step leaves weights and momentum
    bit for bit as they were (the module's docstring says why the momentum starts at zero).
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
        for index, group in enumerate(self.param_groups):
            alike = defaultdict(list)  # foreach ops take tensors of one device and dtype
            for p in group["params"]:
                if p.grad is not None:
                    alike[(p.device, p.dtype)].append(p)
            for (device, dtype), params in alike.items():
                self._step((index, device, dtype), group, params, grad_scale, found_inf)
        return loss

    def _step(self, key: tuple, group, params: List[torch.Tensor], grad_scale, found_inf) -> None:
        """One parameter group's tensors of one device and dtype; key: (the group's index, device, dtype)."""
        flat, update = _flat_like(params)
        torch._foreach_copy_(update, [p.grad for p in params])  # p.grad itself stays as it was
        if grad_scale is not None:
            flat.div_(grad_scale.to(flat.device))
        decay = group["weight_decay"]
        if decay:
            ratio = self._trust_ratios(group, params, update)  # from the gradient before weight decay
            torch._foreach_add_(update, params, alpha=decay)
            self._scale(key, flat, update, ratio)
        # A skipped step (found_inf > 0) changes nothing, and the host never reads found_inf.
        skip = None if found_inf is None else found_inf.to(flat.device) > 0
        if group["momentum"]:  # zero_momentum made the buffers
            momentum = group["momentum"]
            if skip is not None:
                # Multiplying by 1 and adding -0.0 leave every value as it was (+0.0 + -0.0 is +0.0).
                flat.masked_fill_(skip, -0.0)
                momentum = torch.where(skip, 1.0, momentum).to(flat.dtype)
            buffers = [self.state[p]["momentum_buffer"] for p in params]
            torch._foreach_mul_(buffers, momentum)
            torch._foreach_add_(buffers, update)
            if skip is None:
                torch._foreach_add_(params, buffers, alpha=-group["lr"])
                return
            torch._foreach_copy_(update, buffers)
        if skip is not None:
            flat.masked_fill_(skip, 0.0)  # subtracting lr * +0.0 leaves every value as it was, -0.0 too
        torch._foreach_sub_(params, update, alpha=group["lr"])

    @staticmethod
    def _trust_ratios(group, params, grads) -> torch.Tensor:
        """Each tensor's trust * ||w|| / (||g|| + weight_decay * ||w|| + eps), or 1 where either norm is 0."""
        w_norm, g_norm = torch.stack(torch._foreach_norm(params)), torch.stack(torch._foreach_norm(grads))
        ratio = group["trust"] * w_norm / (g_norm + group["weight_decay"] * w_norm + group["eps"])
        return torch.where((w_norm > 0) & (g_norm > 0), ratio, torch.ones_like(ratio))

    def _scale(self, key: tuple, flat: torch.Tensor, update: List[torch.Tensor], ratio: torch.Tensor) -> None:
        """Multiplies each tensor's update by its ratio. A foreach op multiplies a list by one scalar,
        or by tensors of the same shapes (by 0-d ones, a launch per tensor), so the ratios are
        gathered into one buffer of the update's size through a map from each element to its tensor,
        and one multiplication does. The map is kept: repeat_interleave, which would rebuild it each
        step, cost experiment=mlperf measurably more throughput (benchmarks/notes/2026-11-26-fused-frontier.md)."""
        sizes = tuple(u.numel() for u in update)
        # One map per group, device and dtype, made again only when the tensors with gradients
        # change; made lazily, as a copied or unpickled optimizer keeps only its state and groups.
        owners = self.__dict__.setdefault("_owners", {})
        if key not in owners or owners[key][0] != sizes:  # fills, not a copy from the host (a sync)
            owners[key] = sizes, torch.cat([torch.full((size,), i, dtype=torch.int32, device=flat.device)
                                            for i, size in enumerate(sizes)])
        flat.mul_(ratio.index_select(0, owners[key][1]))


def _flat_like(params: List[torch.Tensor]):
    """One buffer for the tensors and a view of it shaped as each one, with its strides where it is
    contiguous or channels_last: foreach ops take one launch for lists whose strides match, a
    launch per tensor otherwise. Views cost no kernel."""
    flat = torch.empty(sum(p.numel() for p in params), dtype=params[0].dtype, device=params[0].device)
    views, offset = [], 0
    for p in params:
        piece = flat[offset:offset + p.numel()]
        dense = p.is_contiguous() or p.is_contiguous(memory_format=torch.channels_last)
        views.append(piece.as_strided(p.shape, p.stride()) if dense else piece.view(p.shape))
        offset += p.numel()
    return flat, views


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
