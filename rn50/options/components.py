"""Options as components: a config group's option names its class with `_target_`, and Hydra's
instantiate builds it from the option's keys. Data pipelines (rn50/options/pipelines.py) and precisions
(rn50/options/precision.py) are built here; nothing in rn50 lists their classes."""

from typing import Any, Optional

from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import DictConfig

from rn50.errors import ConfigError


class Component:
    """What the class of every option has: its name, the option's keys, a compose-time check."""

    name: Optional[str] = None
    """The option's name, which <group>.name must then be; None lets the YAML's name stand."""

    def __init__(self, **keys: Any):
        """instantiate passes the option's keys; the calls read them from cfg.<group>, as checked."""

    def check(self, cfg: DictConfig) -> None:
        """Compose-time checks of the option's keys (ConfigError naming the key); none by default."""


def of(cfg: DictConfig, group: str, example: str, noun: str):
    """The object of cfg.<group>'s option; its class's `name`, where set, must be <group>.name."""
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
    return obj
