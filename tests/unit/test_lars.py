"""rn50's LARS (rn50/recipe/optimizers.py) steps with torch's multi-tensor ops: its steps must be
those of a plain LARS that goes one tensor at a time, written out here, and their number of ops
must not grow with the tensors. tests/unit/test_trained.py runs it under both loss scalers."""

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from helpers.devices import DEVICES  # CUDA too: there foreach ops take their multi-tensor kernels
from rn50.recipe.optimizers import LARS

LR, DECAY, TRUST, EPS = 0.1, 5e-5, 0.001, 1e-9


def tensors(device: str = "cpu"):
    """A group with weight decay: a channels_last convolution weight, a weight of zeros (||w|| = 0)
    and one whose gradients are zero (||g|| = 0); a group without it: batch norm's and a bias."""
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    torch.manual_seed(0)
    conv = torch.randn(8, 3, 3, 3).contiguous(memory_format=torch.channels_last)
    decayed = [conv, torch.zeros(5, 8), torch.randn(4, 6)]
    plain = [torch.randn(8), torch.randn(8), torch.randn(5)]
    return [t.to(device).requires_grad_() for t in decayed], [t.to(device).requires_grad_() for t in plain]


def set_gradients(params, step: int, scale: float = 1.0) -> None:
    generator = torch.Generator().manual_seed(step)
    for i, p in enumerate(params):
        p.grad = (torch.empty_like(p, device="cpu").normal_(generator=generator) * scale).to(p.device)  # keeps channels_last
        if i == 2:  # the weight whose gradient is zero
            p.grad.zero_()


def lars(groups, momentum: float) -> LARS:
    return LARS([{"params": params, "weight_decay": decay} for params, decay in zip(groups, (DECAY, 0.0))],
                lr=LR, momentum=momentum, trust=TRUST, eps=EPS)


@torch.no_grad()
def plain_lars_step(groups, buffers: dict, momentum: float) -> None:
    """LARS one tensor at a time, as the paper writes it; a zero norm leaves SGD's step."""
    for params, decay in zip(groups, (DECAY, 0.0)):
        for p in params:
            update = p.grad + decay * p
            w_norm, g_norm = torch.linalg.vector_norm(p), torch.linalg.vector_norm(p.grad)
            if decay and w_norm > 0 and g_norm > 0:
                update = update * (TRUST * w_norm / (g_norm + decay * w_norm + EPS))
            buffers[p] = momentum * buffers.get(p, 0.0) + update
            p -= LR * buffers[p]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("momentum", [0.9, 0.0])
@pytest.mark.parametrize("scale", [None, 1024.0])
def test_lars_steps_as_a_plain_lars_does(momentum, scale, device):
    mine, plain = tensors(device), tensors(device)
    optimizer, buffers = lars(mine, momentum), {}
    for step in range(4):
        set_gradients(mine[0] + mine[1], step, scale or 1.0)
        if scale:  # as a GradScaler hands them over; a power of 2 unscales exactly
            optimizer.grad_scale, optimizer.found_inf = torch.tensor(scale, device=device), torch.tensor(0.0, device=device)
        optimizer.step()
        set_gradients(plain[0] + plain[1], step)
        plain_lars_step(plain, buffers, momentum)
    for a, b in zip(mine[0] + mine[1], plain[0] + plain[1]):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-9)
    assert mine[0][0].is_contiguous(memory_format=torch.channels_last)
    if momentum:
        for p, q in zip(mine[0] + mine[1], plain[0] + plain[1]):
            torch.testing.assert_close(optimizer.state[p]["momentum_buffer"], buffers[q], rtol=1e-6, atol=1e-9)


def bits(tensors) -> list:
    return [t.detach().clone().view(torch.int32) for t in tensors]


@pytest.mark.parametrize("device", DEVICES)
def test_a_skipped_step_keeps_every_bit_of_weights_and_momentum(device):
    """Gradients of inf and NaN, and weights and momentum holding -0.0, which arithmetic such as
    w + 0.0 would turn into +0.0; torch.equal would not tell them apart, so the bits are compared."""
    groups = tensors(device)
    params = groups[0] + groups[1]
    optimizer = lars(groups, 0.9)
    set_gradients(params, 0)
    optimizer.step()
    with torch.no_grad():
        params[0][0, 0, 0] = -0.0
        optimizer.state[params[3]]["momentum_buffer"][:2] = -0.0
    set_gradients(params, 1, 1024.0)
    params[0].grad[0, 0, 0, 0], params[3].grad[1] = float("inf"), float("nan")
    buffers = [optimizer.state[p]["momentum_buffer"] for p in params]
    before = bits(params) + bits(buffers)
    optimizer.grad_scale, optimizer.found_inf = torch.tensor(1024.0, device=device), torch.tensor(1.0, device=device)
    optimizer.step()
    assert all(torch.equal(a, b) for a, b in zip(before, bits(params) + bits(buffers)))


VIEWS = {"aten::slice", "aten::as_strided", "aten::view", "aten::empty", "aten::to"}


def ops_per_step(n: int, scaled: bool) -> list:
    """The ops a step after the first calls from Python (a foreach op counts once; on a GPU its
    multi-tensor kernel takes the tensors in chunks, so its launches do not grow per tensor either)."""
    weights = [torch.randn(4, 3, requires_grad=True) for _ in range(n)]
    optimizer = LARS([{"params": weights[::2], "weight_decay": DECAY}, {"params": weights[1::2], "weight_decay": 0}],
                     lr=LR)
    for p in weights:
        p.grad = torch.randn_like(p)
    if scaled:
        optimizer.grad_scale, optimizer.found_inf = torch.tensor(2.0), torch.tensor(0.0)
    optimizer.step()  # the first also makes the group's per-tensor element counts, once
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        optimizer.step()
    return sorted(e.name for e in prof.events() if e.name.startswith("aten::") and e.name not in VIEWS
                  and (e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::")))


@pytest.mark.parametrize("scaled", [False, True])
def test_a_step_calls_as_many_ops_for_many_tensors_as_for_few_and_never_reads_the_device(scaled):
    few = ops_per_step(4, scaled)
    assert few == ops_per_step(40, scaled)
    # .item(), bool(tensor) and their kin read a value on the host: a sync per step on a GPU.
    assert not {"aten::item", "aten::_local_scalar_dense", "aten::is_nonzero"} & set(few), few


def test_a_tensor_without_a_gradient_is_left_alone_and_the_next_steps_still_match():
    """A step where a weight has no gradient (a layer unused that step) changes that weight not at
    all and the others as the plain LARS does; its group's map of elements to tensors is made again
    in place, not added beside the old one."""
    mine, plain = tensors(), tensors()
    optimizer, buffers = lars(mine, 0.9), {}
    for step in range(3):
        set_gradients(mine[0] + mine[1], step)
        set_gradients(plain[0] + plain[1], step)
        if step == 1:
            mine[0][0].grad = plain[0][0].grad = None
        optimizer.step()
        plain_lars_step([[p for p in params if p.grad is not None] for params in plain], buffers, 0.9)
    for a, b in zip(mine[0] + mine[1], plain[0] + plain[1]):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-9)
    assert len(optimizer._owners) == 1  # the decayed group's map, on the CPU
