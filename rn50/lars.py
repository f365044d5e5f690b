"""LARS (You, Gitman and Ginsburg, 2017): SGD with momentum whose step for each weight tensor
is scaled by trust * ||w|| / (||g|| + weight_decay * ||w||), so that large global batches
(MLPerf's ResNet-50 runs use 3,000 and more) train with one learning rate for every layer.

Written here rather than taken from timm: it is these few lines, and timm would add a
dependency (and its own torch pin) to every install for one class. Tensors in a parameter
group with weight_decay 0 (batch norm and biases, rn50/optimizers.py) are not adapted, as in
MLPerf's reference implementations.

Under a GradScaler it unscales and skips on the device, as torch's fused optimizers do
(`_step_supports_amp_scaling`): the scaler hands it grad_scale and found_inf instead of reading
found_inf on the host, which would sync every step. A skipped step leaves weights and momentum
as they were (rn50/optimizers.py says why the momentum starts at zero).
"""

import torch


class LARS(torch.optim.Optimizer):
    _step_supports_amp_scaling = True

    def __init__(self, params, lr: float, momentum: float = 0.9, weight_decay: float = 0.0,
                 trust: float = 0.001, eps: float = 1e-9):
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay, trust=trust, eps=eps))
        self._zero_momentum()

    def _zero_momentum(self) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                if self.state[p].get("momentum_buffer") is None:
                    self.state[p]["momentum_buffer"] = torch.zeros_like(p, memory_format=torch.preserve_format)

    def load_state_dict(self, state_dict) -> None:
        super().load_state_dict(state_dict)
        self._zero_momentum()

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
