"""Probe: ResNet's stem max pool (3x3, stride 2, padding 1) as inductor compiles it, against the same pool
written as maxima of strided slices, which inductor turns into pointwise kernels.

The profile of `experiment=fastest` on an H100 (benchmarks/results/2026-11-26-h100-frontier/fastest_profile/kernels.csv)
puts the stem pool's backward, fused with the add of the two gradients that reach its output, at 2.9 ms and its
forward at 0.7 ms of a 79 ms step: inductor stores the argmax offsets in the forward, and in the backward each
input element gathers the gradient of the windows whose offset points at it. The pool's input is the stem's ReLU output, so it is never negative:
padding with zeros instead of -inf gives the same maxima, and the pool becomes nine strided slices of the padded
input and their maximum (`shifted`), or three and three (`separable`: the maximum over columns, then over rows).
The backward is then autograd's maximum backward, recomputed pointwise, with no offsets stored. Where two
positive values in a window tie, torch.maximum splits the gradient between them where MaxPool2d gives it all
to the first; a tie at zero sends nothing through the stem's ReLU either way.

  python benchmarks/probes/stem_pool_probe.py check                 # CPU or GPU: each variant against MaxPool2d
  python benchmarks/probes/stem_pool_probe.py micro [--batch-size N] # GPU: the pool alone, forward and backward
  python benchmarks/probes/stem_pool_probe.py step VARIANT [rn50.baseline's arguments]
                                                             # the bare loop with the variant as the stem pool
Each prints JSON lines.
"""

import json
import sys

import torch
import torch.nn.functional as F
from torch import nn

from fusion_probe import gpu_ms


class ShiftedMax(nn.Module):
    """MaxPool2d(3, 2, 1) for inputs that are never negative: the maximum of nine strided slices."""

    def forward(self, x):
        h, w = (x.shape[-2] + 1) // 2, (x.shape[-1] + 1) // 2
        p = F.pad(x, (1, 1, 1, 1))
        out = None
        for i in range(3):
            for j in range(3):
                tap = p[..., i:i + 2 * h - 1:2, j:j + 2 * w - 1:2]
                out = tap if out is None else torch.maximum(out, tap)
        return out


class SeparableMax(nn.Module):
    """The same pool as the maximum over three columns, then over three rows."""

    def forward(self, x):
        h, w = (x.shape[-2] + 1) // 2, (x.shape[-1] + 1) // 2
        p = F.pad(x, (1, 1, 1, 1))
        cols = torch.maximum(torch.maximum(p[..., 0:2 * w - 1:2], p[..., 1:2 * w:2]), p[..., 2:2 * w + 1:2])
        return torch.maximum(torch.maximum(cols[..., 0:2 * h - 1:2, :], cols[..., 1:2 * h:2, :]),
                             cols[..., 2:2 * h + 1:2, :])


VARIANTS = {"max_pool": lambda: nn.MaxPool2d(3, 2, 1), "shifted": ShiftedMax, "separable": SeparableMax}


def check(device) -> list:
    """Each variant against MaxPool2d behind the stem's ReLU (odd and even sizes, fp32 and fp16), one row each:
    the forward exactly, and the gradient at the ReLU's input. In fp32 that differs only in the order of a sum
    (an element that is the maximum of several windows); in fp16 the 1e-3 threshold is about one rounding step,
    and what crosses it is ties between two positive values (torch.maximum splits the gradient) and rounding."""
    torch.manual_seed(0)
    rows = []
    for dtype in (torch.float32, torch.float16):
        for size in ((2, 8, 112, 112), (2, 8, 15, 17)):
            z = torch.randn(size, device=device).to(dtype).to(memory_format=torch.channels_last)
            want_z = z.detach().requires_grad_()
            want = nn.MaxPool2d(3, 2, 1)(F.relu(want_z))
            g = torch.randn_like(want)
            want.backward(g)
            for name in ("shifted", "separable"):
                got_z = z.detach().requires_grad_()
                got = VARIANTS[name]()(F.relu(got_z))
                got.backward(g)
                diff = (got_z.grad.float() - want_z.grad.float()).abs()
                differ = diff > 1e-3 * want_z.grad.float().abs().max()  # more than the order of a sum
                rows.append({"check": name, "dtype": str(dtype).removeprefix("torch."), "size": size,
                             "forward_equal": bool(torch.equal(got, want)),
                             "grad_elements_differing": int(differ.sum()), "grad_elements": differ.numel(),
                             "grad_max_abs_diff": float(diff.max()),
                             "grad_sum_equal": bool(torch.allclose(got_z.grad.float().sum(),
                                                                   want_z.grad.float().sum(), rtol=1e-3))})
    return rows


def micro(batch_size):
    """The pool alone on the stem's output shape, fp16, NHWC, compiled (inductor's default mode): forward and
    backward, 20 warm-up calls, then 100 timed on the GPU (fusion_probe.gpu_ms, as the other probes time)."""
    x = F.relu(torch.randn(batch_size, 64, 112, 112, device="cuda", dtype=torch.float16))
    x = x.to(memory_format=torch.channels_last).requires_grad_()
    for name, make in VARIANTS.items():
        pool = torch.compile(make())
        g = torch.randn_like(pool(x))

        def once():
            x.grad = None
            pool(x).backward(g)

        ms, _ = gpu_ms(once, iters=100, warmup=20)
        print(json.dumps({"micro": name, "batch_size": batch_size, "ms_forward_backward": ms}))
        torch._dynamo.reset()


def step(variant, argv):
    """rn50's bare loop (python -m rn50.baseline ARGV) with the variant as the stem pool of the network it builds."""
    from rn50.recipe import train_step
    from rn50.tools import baseline

    build = train_step.build_network

    def with_pool(*args, **kwargs):
        net = build(*args, **kwargs)
        net.maxpool = VARIANTS[variant]()
        return net

    train_step.build_network = with_pool
    result = baseline.main(argv)
    print(json.dumps({"step": variant, "images_per_sec": result["images_per_sec"],
                      **{k: result.get(k) for k in ("loss_first", "loss_last", "loss_fell", "skipped_steps_window",
                                                    "skipped_steps", "loss_scale_final")}}))


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else None
    if what == "check":
        for row in check("cuda" if torch.cuda.is_available() else "cpu"):
            print(json.dumps(row))
    elif what == "micro":
        micro(int(sys.argv[3]) if sys.argv[2:3] == ["--batch-size"] else 512)
    elif what == "step" and sys.argv[2:3] and sys.argv[2] in VARIANTS:
        step(sys.argv[2], sys.argv[3:])
    else:
        sys.exit(f"usage: {sys.argv[0]} check | micro [--batch-size N] | step {{{','.join(VARIANTS)}}} [rn50.baseline args]")
