"""profiler=ncu's range: the steps whose kernels Nsight Compute profiles (rn50/profiling/ncu.py)."""

import pytorch_lightning as pl
import torch


class NcuRange(pl.Callback):
    """cudaProfilerStart before step `first_step`, cudaProfilerStop after `steps` steps."""

    def __init__(self, first_step: int, steps: int):
        self.first_step, self.last_step = first_step, first_step + steps - 1
        self._step = 0

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if self._step == self.first_step:
            torch.cuda.synchronize()  # earlier steps' kernels finish outside the range
            torch.cuda.profiler.start()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if self._step == self.last_step:
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()
        self._step += 1
