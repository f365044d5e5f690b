"""torch.compile and CUDA graphs as config: the mode a run compiles with, and whether it can capture.

rn50 captures CUDA graphs through torch.compile (mode=reduce-overhead: inductor's CUDA graph
trees record the compiled forward and backward and replay them), not with a hand-made
torch.cuda.CUDAGraph of the whole step: Lightning's loop runs hooks, the loss scaler and the
optimizer on the host between forward and backward, which a whole-step graph cannot hold, and
in the bare loop the whole-step graph added nothing over compiling (docs/benchmarks.md).
"""

from typing import Optional

from omegaconf import DictConfig

from rn50.config.schema import Accelerator, CompileMode
from rn50.errors import ConfigError

# The compile modes whose compiled graphs inductor replays as CUDA graphs.
CAPTURING_MODES = ("reduce-overhead", "max-autotune")
# cudagraph trees run a compiled graph once eagerly, record it on the next call, then replay.
MIN_WARMUP_STEPS = 3


def compile_mode(model_cfg) -> Optional[str]:
    """torch.compile's mode for the network, or None when it is not compiled."""
    if not model_cfg.compile:
        return None
    mode = model_cfg.compile_mode.value
    return "reduce-overhead" if model_cfg.cuda_graphs and mode == "default" else mode


def check_cuda_graphs(cfg: DictConfig) -> None:
    """Refuse CUDA graphs where they cannot be captured, and record whether the run captures.

    model.cuda_graphs=true needs model.compile=true (the graphs are torch.compile's), and a GPU;
    model.autotune_pointwise and model.autotune_coordinate_descent need model.compile=true too. It
    compiles with mode=reduce-overhead unless compile_mode is max-autotune, which captures
    too. A compiled run whose compile_mode captures by itself (reduce-overhead, max-autotune)
    gets cuda_graphs=true, so the recorded config says what ran. Raises ConfigError, one line
    naming the key, on a CPU run (dist.accelerator=cpu: call it again once `auto` is resolved),
    with compile_mode=max-autotune-no-cudagraphs, and with fewer warm-up steps than recording needs.
    """
    model = cfg.model
    mode = model.compile_mode.value
    for key in ("autotune_pointwise", "autotune_coordinate_descent"):
        if model[key] and not model.compile:
            raise ConfigError(f"model.{key}=true tunes torch.compile's kernels, so it needs "
                              f"model.compile=true; add it, or model.{key}=false")
    if model.cuda_graphs and not model.compile:
        raise ConfigError("model.cuda_graphs=true needs model.compile=true: the graphs are captured "
                          "through torch.compile (mode=reduce-overhead); add it, or model.cuda_graphs=false")
    if model.cuda_graphs and mode == "max-autotune-no-cudagraphs":
        raise ConfigError(
            "model.cuda_graphs=true conflicts with model.compile_mode=max-autotune-no-cudagraphs; "
            "use model.compile_mode=default or max-autotune, or model.cuda_graphs=false"
        )
    by_mode = model.compile and mode in CAPTURING_MODES
    if not (model.cuda_graphs or by_mode):
        return
    asked = "model.cuda_graphs=true" if model.cuda_graphs else f"model.compile_mode={mode}"
    if cfg.dist.accelerator == Accelerator.cpu:
        instead = "model.cuda_graphs=false" if model.cuda_graphs else "model.compile_mode=default"
        raise ConfigError(f"{asked} captures CUDA graphs, which need a GPU, but this run is on the CPU; "
                          f"use {instead}")
    if cfg.bench.warmup_steps < MIN_WARMUP_STEPS:
        raise ConfigError(
            f"bench.warmup_steps={cfg.bench.warmup_steps} is too few for {asked}: the graphs are "
            f"recorded in the warm-up, use bench.warmup_steps >= {MIN_WARMUP_STEPS}"
        )
    model.cuda_graphs = True
    if mode == "default":
        model.compile_mode = CompileMode["reduce-overhead"]
