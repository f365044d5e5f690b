"""Model FLOPs utilization: achieved model FLOP/s over the GPU's peak for the math mode."""

from typing import Optional


def peak_tflops(mfu_cfg, gpu_name: Optional[str], math_mode: str) -> Optional[float]:
    """The override, else the table entry; None (no MFU) for a GPU or mode not in the table."""
    if mfu_cfg.peak_tflops is not None:
        return float(mfu_cfg.peak_tflops)
    row = mfu_cfg.peaks.get(gpu_name) if gpu_name else None
    return float(row[math_mode]) if row and math_mode in row else None


def mfu_pct(images_per_sec_per_device: float, flops_image: float, peak: float) -> float:
    return 100.0 * images_per_sec_per_device * flops_image / (peak * 1e12)
