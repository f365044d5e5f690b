"""Probe (issue 42): how dynamo compiles a network that runs inside DDP, for every process started with
this folder on PYTHONPATH and RN50_PROBE_OPTIMIZE_DDP set (rn50's ranks and the bare loop's alike).

torch._dynamo.config.optimize_ddp: "ddp_optimizer" (torch's default) splits the compiled graph at DDP's
buckets so that each bucket's all-reduce can start while the backward goes on; "no_optimization" compiles
one graph, whose gradients are all-reduced after the whole backward. At 4 GPUs experiment=fastest
compiled 10 graphs against 2 on one GPU and scaled 0.963 (docs/benchmarks.md); this asks what the split
costs where the all-reduce is short (NVLink). Without the variable it does nothing."""

import os

_mode = os.environ.get("RN50_PROBE_OPTIMIZE_DDP")
if _mode:
    import torch._dynamo.config

    torch._dynamo.config.optimize_ddp = _mode
