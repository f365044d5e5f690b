"""benchmarks/fusion_probe.py's pure logic (issue 30): the convolutions it reads off torchvision's ResNet-50 and
the finalize that turns genstats' sums into batch-norm statistics. The GPU part runs on a GPU only."""
import json

import pytest
import torch
import torch.nn.functional as F
from torchvision.models import resnet50

from helpers.benchmarks import benchmark_scripts

probe, backward, triton_probe = benchmark_scripts("fusion_probe", "fusion_probe_backward", "triton_conv_probe")


@pytest.fixture(scope="module")
def layers():
    return probe.conv_layers(batch=256)


def test_every_conv_of_resnet50_is_counted_once(layers):
    with torch.device("meta"):
        convs = [n for n, m in resnet50().named_modules() if isinstance(m, torch.nn.Conv2d)]
    assert len(convs) == 53
    assert sum(L["count"] for L in layers) == 53
    assert sorted(n for L in layers for n in L["modules"]) == sorted(convs)
    assert len(layers) == 24  # stem; layer1 5 distinct; layers 2-4 6 each (the first block's conv1/conv2 differ)


def test_shapes_and_roles(layers):
    by = {L["name"]: L for L in layers}
    stem = by["conv1"]
    assert (stem["c"], stem["k"], stem["r"], stem["stride"], stem["p"], stem["n"]) == (3, 64, 7, 2, 112, 256)
    assert not stem["prologue"] and stem["relu_after"] and not stem["absorbed"]
    down = by["layer2.0.conv2"]  # v1.5: the stride is in the 3x3
    assert (down["c"], down["h"], down["stride"], down["p"], down["count"]) == (128, 56, 2, 28, 1)
    assert by["layer3.1.conv2"]["count"] == 5 and by["layer3.0.conv3"]["count"] == 6
    # conv3 and the downsample of layer1 share a shape but not a role: only conv3's input is a BN+ReLU output
    assert by["layer1.0.conv3"]["prologue"] and not by["layer1.0.downsample.0"]["prologue"]
    for L in layers:
        assert L["prologue"] == (L["role"] in ("conv2", "conv3"))
        assert L["absorbed"] == (L["role"] in ("conv1", "conv2"))
    assert probe.conv_layers(batch=512)[0]["n"] == 512


def test_finalize_equals_biased_var_mean():
    torch.manual_seed(0)
    y = torch.randn(8, 16, 5, 5) * 3 + 1.5
    count = y.numel() // y.shape[1]
    mean, var = probe.finalize(y.sum((0, 2, 3)), (y * y).sum((0, 2, 3)), count)
    ref_var, ref_mean = torch.var_mean(y, dim=(0, 2, 3), unbiased=False)
    torch.testing.assert_close(mean, ref_mean)
    torch.testing.assert_close(var, ref_var, rtol=1e-4, atol=1e-5)
    assert (probe.finalize(torch.ones(3), torch.full((3,), 1 - 1e-7), 1)[1] >= 0).all()  # cancellation clamped


def test_scale_bias_reproduce_training_batch_norm():
    torch.manual_seed(0)
    y, gamma, beta = torch.randn(4, 6, 3, 3), torch.rand(6) + 0.5, torch.randn(6)
    var, mean = torch.var_mean(y, dim=(0, 2, 3), unbiased=False)
    scale, bias = probe.scale_bias(mean, var, gamma, beta)
    ref = F.batch_norm(y, None, None, gamma, beta, training=True, eps=probe.EPS)
    torch.testing.assert_close(y * scale.view(1, -1, 1, 1) + bias.view(1, -1, 1, 1), ref, rtol=1e-5, atol=1e-5)


def test_dry_run_lists_the_filtered_layers(capsys):
    assert probe.main(["--dry-run", "--batch", "512", "--layers", "layer4"]) == 0
    out, err = capsys.readouterr()
    rows = [json.loads(line) for line in out.splitlines()]
    assert len(rows) == 6 and all(r["name"].startswith("layer4") and r["n"] == 512 for r in rows)
    assert "6 distinct convolutions, 10 in all" in err


def test_the_backward_probe_covers_the_32_convs_whose_input_is_a_bn_relu_output(capsys):
    assert backward.main(["--dry-run"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 11 and sum(r["count"] for r in rows) == 32
    assert {r["role"] for r in rows} == {"conv2", "conv3"} and all(r["prologue"] for r in rows)


@pytest.mark.parametrize("stride", [1, 2])
def test_the_backward_probes_steps_give_autograds_gradients(stride):
    """Fused B's steps as torch computes them (the graphs run on a GPU only): dgrad masked by the recomputed
    BN output, the BN backward from it, and wgrad of the recomputed ReLU output give what autograd gives for
    BN (training) -> ReLU -> conv."""
    torch.manual_seed(0)
    x = torch.randn(4, 8, 6, 6, dtype=torch.float64) * 2 + 0.5
    w, dy = torch.randn(16, 8, 3, 3, dtype=torch.float64) * 0.2, torch.randn(4, 16, 6 // stride, 6 // stride, dtype=torch.float64)
    gamma, beta = torch.rand(8, dtype=torch.float64) + 0.5, torch.randn(8, dtype=torch.float64) * 0.1
    leaves = [t.clone().requires_grad_() for t in (x, gamma, beta, w)]
    out = F.conv2d(torch.relu(F.batch_norm(leaves[0], None, None, leaves[1], leaves[2], training=True,
                                           eps=backward.EPS)), leaves[3], stride=stride, padding=1)
    want = torch.autograd.grad(out, leaves, dy)

    mean, var, invstd = backward.batch_stats(x)
    s, b = probe.scale_bias(mean, var, gamma, beta)
    scale, bias = s.view(1, 8, 1, 1), b.view(1, 8, 1, 1)
    dz = backward.masked_dgrad(dy, x, w, scale, bias, stride, 1)
    dx, dgamma, dbeta = backward.bn_backward(dz, x, gamma, mean.double(), invstd.double())
    dw = torch.ops.aten.convolution_backward(dy, torch.relu(x * scale + bias), w, None, [stride] * 2, [1, 1], [1, 1],
                                             False, [0, 0], 1, [False, True, False])[1]
    for got, ref in zip((dx, dgamma, dbeta, dw), want):
        torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-5)


def test_the_triton_probe_covers_every_conv_and_its_sums_are_batch_norms_statistics(capsys):
    assert triton_probe.main(["--dry-run"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 24 and sum(r["count"] for r in rows) == 53
    torch.manual_seed(0)
    x, w = torch.randn(4, 8, 6, 6, dtype=torch.float64), torch.randn(16, 8, 3, 3, dtype=torch.float64)
    y, s, sq = triton_probe.conv_stats(x, w, 2, 1)
    mean, var = probe.finalize(s, sq, y.numel() // 16)
    ref_var, ref_mean = torch.var_mean(F.conv2d(x, w, None, 2, 1), dim=(0, 2, 3), unbiased=False)
    # The sums are fp32, as on the GPU, and E[y^2] - E[y]^2 cancels: fp32's tolerance, not fp64's.
    torch.testing.assert_close(mean.double(), ref_mean, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(var.double(), ref_var, rtol=1e-4, atol=1e-5)


def test_the_triton_probe_reads_the_kernels_inductor_generated():
    # Lines as inductor's CUDA wrapper code has them: a template conv with a reduction after it, and aten's conv.
    code = ("triton_tem_fused_convolution_0 = async_compile.triton('triton_tem_fused_convolution_0', ...)\n"
            "triton_red_fused_convolution_mul_sum_1 = async_compile.triton('triton_red_fused_convolution_mul_sum_1', ...)\n"
            "buf0 = extern_kernels.convolution(arg0_1, arg1_1, stride=(1, 1))")
    found = triton_probe.kernels(code + "\nbuf1 = extern_kernels.mm(arg2_1, arg3_1)")
    assert found["tem"] == ["triton_tem_fused_convolution_0"]
    assert found["red"] == ["triton_red_fused_convolution_mul_sum_1"] and found["per"] == found["poi"] == []
    assert found["extern"] == ["convolution", "mm"]
    template_only = "# Original ATen: [aten.convolution]\ntriton_tem_fused_convolution_0 = async_compile.triton(...)"
    assert triton_probe.kernels(template_only)["extern"] == []  # a comment names aten's op whatever runs it


def test_the_triton_probe_counts_sums_in_the_epilogue_only_where_a_template_ran():
    def row(name, triton, stats):
        kinds = lambda d: {"tem": [], "red": [], "per": [], "poi": [], "extern": [], **d}  # noqa: E731
        return dict(name=name, count=2, status="ok", cudnn_ms=1.0, triton_ms=2.0, cudnn_stats_ms=1.5,
                    triton_stats_ms=2.5, triton_kernels=kinds(triton), triton_stats_kernels=kinds(stats))

    tem = {"tem": ["triton_tem_fused_convolution_0"]}
    rows = [row("fused", tem, tem), row("apart", tem, {**tem, "red": ["triton_red_0"]}),
            row("cublas", {"extern": ["mm"]}, {"extern": ["mm"]}), dict(name="failed", count=1, status="error")]
    got = triton_probe.summary(rows)
    assert got["stats_in_template"] == 2  # "fused" only: "cublas" ran no template, so nothing was fused into one
    assert got["outside_triton"] == ["cublas"] and got["skipped"] == ["failed"]
    assert (got["convs"], got["cudnn_ms"], got["triton_stats_ms"]) == (6, 6.0, 15.0)


def test_c_s_dx_pass_with_dbn_weights_coefficients_is_batch_norms_backward():
    """C's step 2 (the graph runs on a GPU only): dbn_weight's outputs as cuDNN defines them, from dz, x and the
    saved statistics, give aten's BN backward through apply_dx."""
    torch.manual_seed(0)
    x, dz = torch.randn(4, 8, 5, 5, dtype=torch.float64) * 2 + 0.5, torch.randn(4, 8, 5, 5, dtype=torch.float64)
    gamma = torch.rand(8, dtype=torch.float64) + 0.5
    mean, _, invstd = backward.batch_stats(x)
    mean, invstd, count = mean.double(), invstd.double(), x.numel() // 8
    c = lambda v: v.view(1, 8, 1, 1)  # noqa: E731
    dgamma, dbeta = (dz * (x - c(mean)) * c(invstd)).sum((0, 2, 3)), dz.sum((0, 2, 3))
    eq_dy = gamma * invstd
    eq_x = -gamma * invstd ** 2 * dgamma / count
    eq_bias = gamma * invstd * (mean * invstd * dgamma - dbeta) / count
    dx = backward.apply_dx(dz, x, c(eq_dy), c(eq_x), c(eq_bias))
    want = backward.bn_backward(dz, x, gamma, mean, invstd)
    torch.testing.assert_close(dx, want[0], rtol=1e-5, atol=1e-6)  # apply_dx computes in fp32, as on the GPU
    torch.testing.assert_close((dgamma, dbeta), (want[1], want[2]))
