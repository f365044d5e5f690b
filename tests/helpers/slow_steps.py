"""A profiler whose callback makes steps slow on purpose, for tests of what a run prints while it waits.

profiler._target_=helpers.slow_steps.SlowSteps (with tests/ on PYTHONPATH) is profiler=none plus a callback
that adds FIRST_S seconds to the first step, as slow as a first step that autotunes cuDNN or
compiles, and STEP_S to each later one. It is added to the rank's Trainer as any profiler's
callbacks are (rn50/options/profilers.py), and rn50 runs it through its launcher and a rank, unchanged.
"""

import time

from rn50.options.profilers import NoProfiler

FIRST_S = 13.0  # past the 10 s after which a heartbeat line must come
STEP_S = 2.5


class SlowSteps(NoProfiler):
    def callbacks(self, cfg, first_step, device_type, out):
        import pytorch_lightning as pl

        class Sleep(pl.Callback):
            def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
                time.sleep(FIRST_S if batch_idx == 0 else STEP_S)

        return [Sleep()]
