"""benchmarks/stem_pool_probe.py's pools (issue 30): behind a ReLU they are MaxPool2d(3, 2, 1), forward and
backward, which the probe's GPU timings take for granted; its own check says so on the CPU. The timings run on a
GPU only."""
import pytest
import torch
from torch import nn

from helpers.benchmarks import benchmark_scripts

(probe,) = benchmark_scripts("stem_pool_probe")


@pytest.fixture(scope="module")
def rows():
    return probe.check("cpu")


def test_the_check_covers_both_pools_at_both_sizes_and_dtypes(rows):
    assert sorted((r["check"], r["dtype"], r["size"][-1]) for r in rows) == sorted(
        (name, dtype, w) for name in ("shifted", "separable") for dtype in ("float32", "float16") for w in (112, 17))


def test_behind_a_relu_each_pool_is_max_pool_forward_and_backward(rows):
    assert all(r["forward_equal"] and r["grad_sum_equal"] for r in rows)
    for r in rows:
        if r["dtype"] == "float32":  # no two positive values tie: only the order of a sum differs
            assert r["grad_elements_differing"] == 0 and r["grad_max_abs_diff"] <= 1e-6, r


def test_a_negative_input_is_where_zero_padding_would_differ():
    # Why the probe needs the ReLU in front: zero padding wins over a border window of negative values.
    x = -torch.ones(1, 1, 4, 4)
    assert torch.equal(nn.MaxPool2d(3, 2, 1)(x), -torch.ones(1, 1, 2, 2))
    assert torch.equal(probe.VARIANTS["shifted"]()(x), torch.tensor([[[[0.0, 0.0], [0.0, -1.0]]]]))
