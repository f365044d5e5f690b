"""The loss scalers of fp16 precisions, shared by rn50's runs and the bare loop (rn50/baseline.py).

Both are torch's GradScaler, which also keeps each step's found_inf (1 where the step's
gradients overflowed and the optimizer skipped it, else 0) as the device tensor it already is:
no kernel and no host sync per step. Whoever proves the run trained reads them once, where the
host waits for the device anyway (the end of a run, of an epoch), with `take_skipped`.
"""

from typing import List

import torch


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
