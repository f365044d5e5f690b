"""NVTX ranges around the parts of every training step, for Nsight Systems timelines.

Each step is a `step` range holding `forward`, `backward` and `optimizer`; the host time
between one step's end and the next step's start is `data`. A range push or pop is a
call into the NVTX library that does nothing unless a tool is attached, so the ranges
stay on in measured runs (profiler.nvtx=false turns them off to check that claim).
"""

from typing import Callable, List, Optional

import pytorch_lightning as pl
import torch.cuda.nvtx


class NvtxRanges(pl.Callback):
    """Pushes and pops NVTX ranges from Lightning's hooks; every range pushed is popped."""

    def __init__(self, push: Optional[Callable[[str], object]] = None, pop: Optional[Callable[[], object]] = None):
        if push is None or pop is None:
            push, pop = torch.cuda.nvtx.range_push, torch.cuda.nvtx.range_pop
        self._push, self._pop = push, pop
        self._open: List[str] = []  # innermost last

    def _enter(self, name: str) -> None:
        self._push(name)
        self._open.append(name)

    def _leave(self, name: str) -> None:
        """Close `name` and whatever is still open inside it; nothing if it is not open."""
        if name not in self._open:
            return
        while self._open:
            self._pop()
            if self._open.pop() == name:
                return

    def on_train_start(self, trainer, pl_module):
        self._enter("data")  # the first batch is fetched after this hook

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self._leave("data")
        self._enter("step")
        self._enter("forward")

    def on_before_backward(self, trainer, pl_module, loss):
        self._leave("forward")
        self._enter("backward")

    def on_after_backward(self, trainer, pl_module):
        self._leave("backward")

    def on_before_optimizer_step(self, trainer, pl_module, optimizer):
        self._enter("optimizer")

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self._leave("step")  # closes optimizer too
        self._enter("data")

    def on_train_end(self, trainer, pl_module):
        self._close_all()

    def on_exception(self, trainer, pl_module, exception):
        self._close_all()

    def _close_all(self) -> None:
        while self._open:
            self._leave(self._open[0])
