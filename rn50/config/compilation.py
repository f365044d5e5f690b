"""torch.compile and CUDA graphs as config: the mode a run compiles with, and whether it can capture.

rn50 captures CUDA graphs through torch.compile (mode=reduce-overhead: inductor's CUDA graph
trees record the compiled forward and backward and replay them), not with a hand-made
torch.cuda.CUDAGraph of the whole step: Lightning's loop runs hooks, the loss scaler and the
optimizer on the host between forward and backward, which a whole-step graph cannot hold, and
in the bare loop the whole-step graph added nothing over compiling (benchmarks/notes/2026-11-23-frontier.md).
"""

from typing import Any, Dict, Optional

from omegaconf import DictConfig

from rn50.config.schema import Accelerator, CompileDDP, CompileMode
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
    """Refuse CUDA graphs where they cannot be captured; a pure check (cuda_graph_keys says
    what a valid config captures).

    model.cuda_graphs=true needs model.compile=true (the graphs are torch.compile's), and a GPU;
    model.autotune_pointwise, model.autotune_coordinate_descent and a model.compile_ddp other than
    torch's default need model.compile=true too.
    Raises ConfigError, one line naming the key, on a CPU run (dist.accelerator=cpu: call it again
    once `auto` is resolved), with compile_mode=max-autotune-no-cudagraphs, and with fewer warm-up
    steps than recording needs.
    """
    model = cfg.model
    mode = model.compile_mode.value
    for key in ("autotune_pointwise", "autotune_coordinate_descent"):
        if model[key] and not model.compile:
            raise ConfigError(f"model.{key}=true tunes torch.compile's kernels, so it needs "
                              f"model.compile=true; add it, or model.{key}=false")
    if model.compile_ddp != CompileDDP.ddp_optimizer and not model.compile:
        raise ConfigError(f"model.compile_ddp={model.compile_ddp.value} sets how torch.compile splits the graph "
                          f"for DDP, so it needs model.compile=true; add it, or model.compile_ddp=ddp_optimizer")
    if model.cuda_graphs and not model.compile:
        raise ConfigError("model.cuda_graphs=true needs model.compile=true: the graphs are captured "
                          "through torch.compile (mode=reduce-overhead); add it, or model.cuda_graphs=false")
    if model.cuda_graphs and mode == "max-autotune-no-cudagraphs":
        raise ConfigError(
            "model.cuda_graphs=true conflicts with model.compile_mode=max-autotune-no-cudagraphs; "
            "use model.compile_mode=default or max-autotune, or model.cuda_graphs=false"
        )
    if not captures(model):
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


def captures(model_cfg) -> bool:
    """Whether the run captures CUDA graphs: asked for, or by a compile mode that captures by itself."""
    return model_cfg.cuda_graphs or (model_cfg.compile and model_cfg.compile_mode.value in CAPTURING_MODES)


def cuda_graph_keys(model_cfg) -> Dict[str, Any]:
    """What a run that captures records, for a config check_cuda_graphs passed (preflight decides
    them): model.cuda_graphs=true, and model.compile_mode=default as reduce-overhead, the mode that
    captures, so that the recorded config says what ran. Nothing for a run that does not capture."""
    if not captures(model_cfg):
        return {}
    keys: Dict[str, Any] = {"model.cuda_graphs": True}
    if model_cfg.compile_mode.value == "default":
        keys["model.compile_mode"] = CompileMode["reduce-overhead"]
    return keys
