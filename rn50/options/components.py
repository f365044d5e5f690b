"""Options as components: a config group's option names its class with `_target_`, and Hydra's
instantiate builds it from the option's keys. Data pipelines (rn50/options/pipelines.py),
precisions (rn50/options/precision.py), clusters (rn50/options/clusters.py) and profilers
(rn50/options/profilers.py) are built here; nothing in rn50 lists their classes.

A process builds its options once (Options.of) and hands them to what uses them; each option
keeps its group's typed keys (`keys`: cfg.<group>, typed by its schema), which its calls read.
"""

from dataclasses import dataclass
from typing import Any, Optional

from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import DictConfig

from rn50.errors import ConfigError


class Component:
    """What the class of every option has: its name, the option's keys, a compose-time check."""

    name: Optional[str] = None
    """The option's name, which <group>.name must then be; None lets the YAML's name stand."""
    keys: Any = None
    """The option's own keys, cfg.<group> as composed (typed by its schema; `of` sets them). What is
    decided later (launcher/launch.py's preflight, a rank's batch search) is in the config the calls
    are handed, never written here."""
    run: Optional["Options"] = None
    """The run's options, this one among them, where they were built together (Options.of): how one
    option reads another (data=dali's float16 output follows the precision's autocast)."""

    def __init__(self, **keys: Any):
        """instantiate passes the option's keys; `of` then keeps their typed node as `keys`."""

    def check(self, cfg: DictConfig) -> None:
        """Compose-time checks of the option's keys (ConfigError naming the key); none by default."""


# Each group whose options are components: an example class, and what its error calls one.
GROUPS = {"data": ("rn50.options.pipelines.Dali", "pipeline"), "precision": ("rn50.options.precision.Amp", "precision"),
          "cluster": ("rn50.options.clusters.Slurm", "cluster"),
          "profiler": ("rn50.options.profilers.PyTorch", "profiler")}


@dataclass
class Options:
    """A run's option objects, built once per process (Options.of) and handed to what uses them."""

    data: Any
    """The data pipeline (rn50/options/pipelines.py)."""
    precision: Any
    """rn50/options/precision.py's."""
    cluster: Any
    """rn50/options/clusters.py's."""
    profiler: Any
    """rn50/options/profilers.py's."""

    def __post_init__(self):
        # An option handed to a second Options.of (a test's) belongs to that run from then on.
        for option in (self.data, self.precision, self.cluster, self.profiler):
            option.run = self

    @classmethod
    def of(cls, cfg: DictConfig, **built: Any) -> "Options":
        """Each group's option of cfg; `built`: those the caller built already (group=object; None
        builds it here)."""
        return cls(**{group: built[group] if built.get(group) is not None else of(cfg, group) for group in GROUPS})


def of(cfg: DictConfig, group: str):
    """The object of cfg.<group>'s option; its class's `name`, where set, must be <group>.name."""
    example, noun = GROUPS[group]
    node = cfg[group]
    try:
        obj = instantiate(node, _convert_="none")
    except InstantiationException as exc:
        raise ConfigError(f"{group}._target_={node._target_} cannot be built: {exc.__cause__ or exc}; "
                          f"name a class that takes the {group} keys, such as {example}") from None
    # <group>.name labels the run in MLflow; the option chooses the class. A name set on its own
    # (data.name=dali) would record an option that does not run.
    if obj.name is not None and node.name != obj.name:
        raise ConfigError(f"{group}.name={node.name} does not match {group}._target_={node._target_}, "
                          f"which is {group}={obj.name}; choose the {noun} with {group}={node.name}")
    obj.keys = node
    return obj
