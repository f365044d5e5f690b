"""rn50: declarative ResNet-50 training benchmarks (python -m rn50)."""

import time

STARTED = time.time()  # when this process first imported rn50: the command's start, for time/startup_s
