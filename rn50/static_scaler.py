"""precision=amp_static's loss scaler, shared by rn50's runs and the bare loop (rn50/baseline.py)."""

import torch


class StaticGradScaler(torch.amp.GradScaler):
    """Loss scaling with a fixed scale: overflowing steps are still skipped, the scale never moves."""

    def update(self, new_scale=None) -> None:
        super().update(self._init_scale)
