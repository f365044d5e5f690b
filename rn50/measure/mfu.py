"""Model FLOPs utilization: achieved model FLOP/s over the GPU's peak for the math mode."""

import functools
from typing import Optional

@functools.lru_cache(maxsize=None)  # a warm rank counts each network once
def flops_per_image(arch: str, num_classes: int, image_size: int) -> float:
    """Forward plus backward FLOPs of one image, counted by Lightning on the meta device."""
    import torch
    import torchvision
    from lightning_fabric.utilities.throughput import measure_flops

    batch = 2
    with torch.device("meta"):
        net = getattr(torchvision.models, arch)(weights=None, num_classes=num_classes)
        images = torch.empty(batch, 3, image_size, image_size)
    return measure_flops(net, lambda: net(images), lambda out: out.sum()) / batch


def peak_tflops(mfu_cfg, gpu_name: Optional[str], math_mode: str) -> Optional[float]:
    """The override, else the table entry; None (no MFU) for a GPU or mode not in the table."""
    if mfu_cfg.peak_tflops is not None:
        return float(mfu_cfg.peak_tflops)
    row = mfu_cfg.peaks.get(gpu_name) if gpu_name else None
    return float(row[math_mode]) if row and math_mode in row else None


def mfu_pct(images_per_sec_per_device: float, flops_image: float, peak: float) -> float:
    return 100.0 * images_per_sec_per_device * flops_image / (peak * 1e12)
