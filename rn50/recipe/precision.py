"""The rank half of the precision options (rn50/options/precision.py): TF32 math, Lightning's
precision plugins, and the loss scalers of fp16, shared by rn50's runs and the bare loop
(rn50/tools/baseline.py).

Both scalers are torch's GradScaler, which also keeps each step's found_inf (1 where the step's
gradients overflowed and the optimizer skipped it, else 0) as the device tensor it already is:
no kernel and no host sync per step. Whoever proves the run trained reads them once, where the
host waits for the device anyway (the end of a run, of an epoch), with `read_scaler`.
"""

import logging
from typing import List, Optional

import torch
from pytorch_lightning.plugins.precision import MixedPrecision, Precision

log = logging.getLogger("rn50")


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


class GradScaler(torch.amp.GradScaler):
    """Dynamic loss scaling (precision=amp), counting the steps it skipped."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._found: List[torch.Tensor] = []

    def update(self, new_scale=None) -> None:
        if self._enabled:
            # torch replaces these states in update(); each step's found_inf is a fresh tensor.
            found = [f for state in self._per_optimizer_states.values() for f in state["found_inf_per_device"].values()]
            if found:
                self._found.append(found[0] if len(found) == 1 else torch.stack([f.to(found[0].device) for f in found]).amax())
        super().update(new_scale)

    def take_skipped(self) -> List[float]:
        """1.0 for each step skipped since the last call, else 0.0, in order; reading them waits
        for the device."""
        found, self._found = self._found, []
        return torch.stack(found).tolist() if found else []


class StaticGradScaler(GradScaler):
    """Loss scaling with a fixed scale (precision=amp_static): overflowing steps are still skipped,
    the scale never moves."""

    def update(self, new_scale=None) -> None:
        super().update(self._init_scale)


def read_scaler(scaler, steps: Optional[int] = None) -> dict:
    """What proves a run's steps: skipped (1.0 per step the scaler skipped since the last read, in
    order; [] without a scaler, so none was; None where the scaler does not say) and loss_scale
    (its scale now, or None). steps: how many steps ran since the last read; a scaler that kept
    another count (a torch whose GradScaler changed inside) says nothing rather than 0.
    Reading waits for the device: call it where the host waits anyway."""
    if scaler is None:
        return {"skipped": [], "loss_scale": None}
    skipped = scaler.take_skipped() if hasattr(scaler, "take_skipped") else None  # a user's own scaler
    if skipped is not None and steps is not None and len(skipped) != steps:
        log.warning("the loss scaler kept %d skip flags for %d steps: skipped steps are not reported", len(skipped),
                    steps)
        skipped = None
    return {"skipped": skipped, "loss_scale": float(scaler.get_scale())}
