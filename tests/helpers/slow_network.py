"""A profiler whose callback slows its host's network when the measured windows begin, for a test that a
run names a network that changed under it.

profiler._target_=helpers.slow_network.SlowNetwork (with tests/ on PYTHONPATH) is profiler=none plus a
callback that, at the first measured step, holds what leaves the host's eth0 to RATE (tc's token bucket
filter; tc's netem, which would add a delay instead, is missing from some kernels, this machine's among
them). It runs on a host of tests/helpers/netns.py's test network, whose namespace and its links, the
limit with them, the test removes: the all-reduce timed before the first step crosses the veth link at its
own speed (gigabytes a second), the one after the windows the limited link.
"""

import subprocess

from helpers import netns
from rn50.options.profilers import NoProfiler

RATE = "1gbit"  # an all-reduce of resnet18's 47 MB of gradients took 0.39 s then, 0.05 s before: 8 times longer
# The limit must be tc's token bucket on a test host's eth0 (tc's arguments: tbf needs a burst and a latency).
TBF = ["tbf", "rate", RATE, "burst", "1mb", "latency", "100ms"]


def in_test_network() -> bool:
    """Whether this process's eth0 is a test host's, with an address in tests/helpers/netns.py's subnet: the
    limit outlives the process, and on a machine's own eth0 it would stay until someone removed it."""
    shown = subprocess.run(["ip", "-o", "-4", "addr", "show", "dev", "eth0"], capture_output=True, text=True)
    return f" inet {netns.SUBNET}." in shown.stdout


class SlowNetwork(NoProfiler):
    def callbacks(self, cfg, first_step, device_type, out):
        import pytorch_lightning as pl

        if not in_test_network():
            raise RuntimeError("helpers.slow_network limits eth0 only on a host of tests/helpers/netns.py's test "
                               "network (an address in its subnet on eth0)")
        first_measured = cfg.bench.warmup_steps

        class Slow(pl.Callback):
            def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
                if batch_idx == first_measured:
                    subprocess.run(["tc", "qdisc", "replace", "dev", "eth0", "root", *TBF], check=True)

        return [Slow()]
