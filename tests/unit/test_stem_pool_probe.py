"""benchmarks/stem_pool_probe.py's pools (issue 30): behind a ReLU they are MaxPool2d(3, 2, 1), forward and
backward, which the probe's GPU timings take for granted. The timings run on a GPU only."""
import importlib.util
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

_spec = importlib.util.spec_from_file_location(
    "stem_pool_probe", Path(__file__).parents[2] / "benchmarks" / "stem_pool_probe.py")
probe = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(probe)


@pytest.mark.parametrize("variant", ["shifted", "separable"])
@pytest.mark.parametrize("size", [(2, 4, 16, 16), (1, 3, 15, 17)])
def test_behind_a_relu_each_pool_is_max_pool_forward_and_backward(variant, size):
    torch.manual_seed(0)
    z = torch.randn(size).to(memory_format=torch.channels_last)  # fp32: no two positive values tie
    want_z, got_z = z.clone().requires_grad_(), z.clone().requires_grad_()
    want = nn.MaxPool2d(3, 2, 1)(F.relu(want_z))
    got = probe.VARIANTS[variant]()(F.relu(got_z))
    assert torch.equal(got, want)
    g = torch.randn_like(want)
    want.backward(g)
    got.backward(g)
    torch.testing.assert_close(got_z.grad, want_z.grad, rtol=0, atol=1e-6)  # only the order of a sum differs


def test_a_negative_input_is_where_zero_padding_would_differ():
    # Why the probe needs the ReLU in front: zero padding wins over a border window of negative values.
    x = -torch.ones(1, 1, 4, 4)
    assert torch.equal(nn.MaxPool2d(3, 2, 1)(x), -torch.ones(1, 1, 2, 2))
    assert torch.equal(probe.VARIANTS["shifted"]()(x), torch.tensor([[[[0.0, 0.0], [0.0, -1.0]]]]))
