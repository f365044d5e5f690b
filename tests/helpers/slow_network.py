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

from rn50.options.profilers import NoProfiler

RATE = "1gbit"  # an all-reduce of resnet18's 47 MB of gradients then takes about 0.4 s, over ten times longer


class SlowNetwork(NoProfiler):
    def callbacks(self, cfg, first_step, device_type, out):
        import pytorch_lightning as pl

        first_measured = cfg.bench.warmup_steps

        class Slow(pl.Callback):
            def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
                if batch_idx == first_measured:
                    subprocess.run(["tc", "qdisc", "replace", "dev", "eth0", "root", "tbf", "rate", RATE,
                                    "burst", "1mb", "latency", "100ms"], check=True)

        return [Slow()]
