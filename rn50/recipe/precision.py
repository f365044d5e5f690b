"""The rank half of the precision options (rn50/options/precision.py): TF32 math, Lightning's
precision plugins, and the loss scalers of fp16 (rn50/recipe/scalers.py)."""

import torch
from pytorch_lightning.plugins.precision import MixedPrecision, Precision

from rn50.recipe.scalers import GradScaler, StaticGradScaler  # noqa: F401  the precisions' scalers


def set_math_mode(tf32: bool) -> None:
    """Whether cuBLAS and cuDNN may run fp32 matmuls and convolutions in TF32."""
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32


def full() -> Precision:
    """fp32 tensors: Lightning's plain precision plugin."""
    return Precision()


def mixed(mode: str, device_type: str, scaler=None) -> MixedPrecision:
    """Autocast to fp16 ("16-mixed", with its scaler) or bf16 ("bf16-mixed"); built directly, so that it also
    runs on a CPU."""
    return MixedPrecision(mode, device_type, scaler)
