"""One optimizer step over ResNet-50's 161 parameter tensors on a GPU: rn50's multi-tensor LARS against
the same LARS one tensor at a time (rn50's LARS before issue 30) and against rn50's fused SGD, without a
loss scaler and under one (grad_scale and found_inf handed over as a GradScaler does). Prints one JSON
line per optimizer and scaler: CUDA kernels a step (torch.profiler) and ms a step (CUDA events over 50
steps, synchronized at the edges only), and whether a skipped step kept every weight.

Usage: PYTHONPATH=. python3 benchmarks/probes/lars_step.py > lars_step.jsonl
"""
import json

import torch
import torchvision
from torch.profiler import ProfilerActivity, profile

from rn50.recipe.optimizers import LARS, SGD, param_groups

LR, DECAY, STEPS = 1.0, 5e-5, 50


class PerTensorLARS(LARS):
    """rn50's LARS step before issue 30: the same arithmetic, one tensor at a time."""

    @torch.no_grad()
    def step(self, closure=None):
        grad_scale, found_inf = getattr(self, "grad_scale", None), getattr(self, "found_inf", None)
        for group in self.param_groups:
            decay = group["weight_decay"]
            for p in group["params"]:
                raw = p.grad if grad_scale is None else p.grad / grad_scale
                grad = raw.add(p, alpha=decay) if decay else raw.clone()
                if decay:
                    w_norm, g_norm = torch.linalg.vector_norm(p), torch.linalg.vector_norm(raw)
                    ratio = group["trust"] * w_norm / (g_norm + decay * w_norm + group["eps"])
                    grad.mul_(torch.where((w_norm > 0) & (g_norm > 0), ratio, torch.ones_like(ratio)))
                buf = self.state[p]["momentum_buffer"]
                if found_inf is None:
                    buf.mul_(group["momentum"]).add_(grad)
                    p.add_(buf, alpha=-group["lr"])
                    continue
                skip = found_inf > 0
                buf.copy_(torch.where(skip, buf, buf * group["momentum"] + grad))
                p.copy_(torch.where(skip, p, p - group["lr"] * buf))


def build(name: str, net):
    groups = param_groups(net, DECAY)
    if name == "fused SGD":
        return SGD(groups, lr=0.1, momentum=0.9, fused=True)
    return (LARS if name == "LARS" else PerTensorLARS)(groups, lr=LR, momentum=0.9)  # zero momentum buffers made


def measure(name: str, scaled: bool) -> dict:
    torch.manual_seed(0)
    net = torchvision.models.resnet50().cuda().to(memory_format=torch.channels_last)
    params = list(net.parameters())
    for p in params:
        p.grad = torch.randn_like(p) * (1024.0 if scaled else 1.0)
    optimizer = build(name, net)
    if scaled:
        optimizer.grad_scale = torch.tensor(1024.0, device="cuda")
        optimizer.found_inf = torch.tensor(0.0, device="cuda")
    for _ in range(3):
        optimizer.step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        optimizer.step()
        torch.cuda.synchronize()
    kernels = sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(STEPS):
        optimizer.step()
    end.record()
    torch.cuda.synchronize()
    row = dict(optimizer=name, scaled=scaled, tensors=len(params), kernels_per_step=kernels,
               ms_per_step=round(start.elapsed_time(end) / STEPS, 3))
    if scaled:  # a skipped step: every weight as it was, bit for bit
        before = [p.detach().clone() for p in params]
        params[0].grad[0, 0, 0, 0] = float("inf")
        optimizer.found_inf.fill_(1.0)
        optimizer.step()
        row["skip_kept_weights"] = all(torch.equal(a.view(torch.int32), b.view(torch.int32))
                                       for a, b in zip(before, params))
    return row


if __name__ == "__main__":
    print(json.dumps(dict(torch=torch.__version__, gpu=torch.cuda.get_device_name())), flush=True)
    for name in ("LARS", "per-tensor LARS", "fused SGD"):
        for scaled in (False, True):
            print(json.dumps(measure(name, scaled)), flush=True)
