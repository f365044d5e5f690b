"""Precision options as Lightning precision plugins and matmul math modes."""

from typing import Optional

import torch
from pytorch_lightning.plugins.precision import MixedPrecision, Precision

from rn50.schema import PrecisionName

class StaticGradScaler(torch.amp.GradScaler):
    """Loss scaling with a fixed scale: overflowing steps are still skipped, the scale never moves."""

    def update(self, new_scale=None) -> None:
        super().update(self._init_scale)


def set_math_mode(name: PrecisionName) -> None:
    """fp32 means true fp32: TF32 off in cuBLAS and cuDNN. Every other mode allows TF32."""
    tf32 = name != PrecisionName.fp32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32


def plugin(name: PrecisionName, device_type: str, loss_scale: Optional[float]) -> Precision:
    """The Lightning plugin for a precision; fp16 AMP is built directly so it also runs on CPU."""
    if name == PrecisionName.amp:
        return MixedPrecision("16-mixed", device_type, torch.amp.GradScaler(device_type))
    if name == PrecisionName.amp_static:
        return MixedPrecision("16-mixed", device_type, StaticGradScaler(device_type, init_scale=loss_scale))
    if name == PrecisionName.bf16:
        return MixedPrecision("bf16-mixed", device_type)
    return Precision()
