"""rn50: declarative ResNet-50 training benchmarks (python -m rn50)."""

import time

STARTED = time.time()  # when this process first imported rn50: the command's start, for time/startup_s

from rn50.measure import settings  # noqa: E402  (torch-free: os and sys)

# Every run's processes import rn50 first (`python -m rn50`, the launcher or a rank under torchrun and
# SLURM; a pool rank inherits the variables): Python's bytecode kept before Hydra's and torch's imports.
settings.set_bytecode_cache()
