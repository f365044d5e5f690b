"""LARS (You, Gitman and Ginsburg, 2017): SGD with momentum whose step for each weight tensor
is scaled by trust * ||w|| / (||g|| + weight_decay * ||w||), so that large global batches
(MLPerf's ResNet-50 runs use 3,000 and more) train with one learning rate for every layer.

Written here rather than taken from timm: it is these few lines, and timm would add a
dependency (and its own torch pin) to every install for one class. Tensors in a parameter
group with weight_decay 0 (batch norm and biases, rn50/recipe.py) are not adapted, as in
MLPerf's reference implementations.
"""

import torch


class LARS(torch.optim.Optimizer):
    def __init__(self, params, lr: float, momentum: float = 0.9, weight_decay: float = 0.0,
                 trust: float = 0.001, eps: float = 1e-9):
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay, trust=trust, eps=eps))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            decay, adapt = group["weight_decay"], group["weight_decay"] != 0
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad.add(p, alpha=decay) if decay else p.grad.clone()
                if adapt:
                    w_norm, g_norm = torch.linalg.vector_norm(p), torch.linalg.vector_norm(p.grad)
                    ratio = group["trust"] * w_norm / (g_norm + decay * w_norm + group["eps"])
                    # A zero weight or gradient norm (a fresh layer) leaves the step as SGD's.
                    grad.mul_(torch.where((w_norm > 0) & (g_norm > 0), ratio, torch.ones_like(ratio)))
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = grad.clone()
                else:
                    state["momentum_buffer"].mul_(group["momentum"]).add_(grad)
                p.add_(state["momentum_buffer"], alpha=-group["lr"])
        return loss
