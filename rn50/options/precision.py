"""Precisions as components: each conf/precision/*.yaml names its class with `_target_`, and
Hydra's instantiate builds it from the option's keys (cfg.precision, typed by the option's own
schema where it has keys of its own, as amp_static's loss_scale). A class says:

- check(cfg): compose-time checks of its keys (ConfigError, one line naming the key);
- plugin(device_type): the Lightning precision plugin of each rank;
- autocast: the autocast dtype's name, or None; scaler(device_type): its loss scaler, or None
  (rn50/recipe/precision.py: one that keeps each step's found_inf, which proves what it skipped);
- tf32: whether cuBLAS and cuDNN may use TF32; peak: the column of conf/mfu/peaks.yaml that MFU
  divides by.

The launcher builds these objects too, so this module imports neither torch nor Lightning: the
plugins and scalers a rank needs come from rn50/recipe/precision.py, reached by `in_rank()`. Adding a precision is one YAML file and one class, as for data pipelines.
"""

from typing import Any, Optional

from omegaconf import DictConfig

from rn50.config.reads import positive
from rn50.errors import ConfigError
from rn50.options import components

FP16_MAX = 65504.0
"""The largest finite fp16 value."""


def of(cfg: DictConfig) -> "Precision":
    """The run's precision object, built from cfg.precision's `_target_`. A run builds it once, with the
    other options (components.Options), and hands it on; this is for a caller that has none."""
    return components.of(cfg, "precision")


def in_rank():
    """The rank half of the precisions (rn50/recipe/precision.py): Lightning's plugins, torch's scalers."""
    from rn50.recipe import precision  # deferred: only a rank imports torch; the launcher builds precisions too

    return precision


class Precision(components.Component):
    """What every precision answers; the base is tf32's: fp32 tensors, TF32 math allowed."""

    autocast: Optional[str] = None
    """torch dtype name the forward pass autocasts to (float16, bfloat16), or None."""
    tf32 = True
    peak = "tf32"

    def scaler(self, device_type: str):
        """The loss scaler of fp16 training; None where gradients need no scaling."""
        return None

    def plugin(self, device_type: str):
        return in_rank().full()


class Fp32(Precision):
    """True fp32: TF32 off in cuBLAS and cuDNN."""

    name, tf32, peak = "fp32", False, "fp32"


class Tf32(Precision):
    name = "tf32"


class Amp(Precision):
    """fp16 autocast with dynamic loss scaling; the plugin is built directly so it also runs on CPU."""

    name, autocast, peak = "amp", "float16", "fp16"

    def scaler(self, device_type: str):
        return in_rank().GradScaler(device_type)

    def plugin(self, device_type: str):
        return in_rank().mixed("16-mixed", device_type, self.scaler(device_type))


class AmpStatic(Amp):
    """fp16 autocast with a fixed loss scale: overflowing steps are still skipped."""

    name = "amp_static"

    def __init__(self, loss_scale: float, **keys: Any):
        self.loss_scale = loss_scale

    def check(self, cfg: DictConfig) -> None:
        positive(cfg, "precision.loss_scale", "amp_static needs a fixed loss scale, e.g. 1024")
        if self.keys.loss_scale > FP16_MAX:  # every scaled fp16 gradient would overflow: no step is taken
            raise ConfigError(f"precision.loss_scale={self.keys.loss_scale:g} is out of range: above fp16's largest "
                              f"value ({FP16_MAX:g}) every step overflows and is skipped; use e.g. 1024")

    def scaler(self, device_type: str):
        return in_rank().StaticGradScaler(device_type, init_scale=self.loss_scale)


class Bf16(Precision):
    """bf16 autocast: fp32's range, so no loss scaling."""

    name, autocast, peak = "bf16", "bfloat16", "bf16"

    def plugin(self, device_type: str):
        return in_rank().mixed("bf16-mixed", device_type)
