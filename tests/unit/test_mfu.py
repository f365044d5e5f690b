"""FLOPs come from Lightning's counter; peaks from the config table, never guessed."""

import pytest

from rn50.measure import timing
from rn50.recipe.model import flops_per_image
from rn50.recipe.precision import StaticGradScaler


def test_resnet50_flops_per_image():
    # 4.1 GMACs forward at 224 px; FlopCounter counts 2 FLOPs a MAC and backward as twice forward.
    assert flops_per_image("resnet50", 1000, 224) / 1e9 == pytest.approx(24.3, rel=0.02)


def test_flops_scale_with_pixels():
    small, big = (flops_per_image("resnet18", 1000, s) for s in (112, 224))
    assert 3.5 < big / small < 4.0  # convolutions scale with pixels, the classifier does not


@pytest.mark.parametrize("gpu", ["NVIDIA H100 80GB HBM3", "NVIDIA H200"])
@pytest.mark.parametrize("mode", ["fp32", "tf32", "fp16", "bf16"])  # every precision's peak
def test_hopper_gpus_have_every_peak(compose_cfg, gpu, mode):
    peak = timing.peak_tflops(compose_cfg().mfu, gpu, mode)
    assert peak is not None and peak > 50


def test_unknown_gpu_gets_no_peak(compose_cfg):
    cfg = compose_cfg()
    assert timing.peak_tflops(cfg.mfu, "NVIDIA Imaginary 9000", "fp16") is None
    assert timing.peak_tflops(cfg.mfu, None, "fp16") is None
    assert timing.peak_tflops(cfg.mfu, "Tesla V100-SXM2-32GB", "bf16") is None


def test_override_wins(compose_cfg):
    cfg = compose_cfg(["mfu.peak_tflops=100"])
    assert timing.peak_tflops(cfg.mfu, None, "fp32") == 100.0


def test_mfu_pct():
    # 1000 img/s x 24.3 GFLOP = 24.3 TFLOP/s of a 243 TFLOP/s peak.
    assert timing.mfu_pct(1000, 24.3e9, 243.0) == pytest.approx(10.0)


def test_static_scaler_keeps_its_scale_through_overflow():
    torch = pytest.importorskip("torch")
    p = torch.nn.Parameter(torch.ones(2))
    opt = torch.optim.SGD([p], lr=0.1)
    scaler = StaticGradScaler("cpu", init_scale=1024.0)
    for weight in (torch.tensor([float("inf"), 1.0]), torch.tensor([1.0, 1.0])):
        opt.zero_grad()
        scaler.scale((p * weight).sum()).backward()
        scaler.step(opt)
        scaler.update()
        assert scaler.get_scale() == 1024.0
    assert p.detach().tolist() == pytest.approx([0.9, 0.9])  # the overflowing step was skipped
