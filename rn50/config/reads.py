"""What the launcher and the ranks read off a composed config beyond its keys: the world size, the NnMg
name of a dist, a run's name, whether its batch is searched, the class count with no class folders, and
the one-line range check (positive) that every option's checks use. The keys themselves are
rn50/config/schema.py's."""

from typing import Any

from omegaconf import DictConfig

from rn50.config.schema import Accelerator
from rn50.errors import ConfigError


def positive(cfg: DictConfig, key: str, hint: str, minimum: Any = 1) -> None:
    value = cfg
    for part in key.split("."):
        value = value[part]
    if value is None or value < minimum:
        raise ConfigError(f"{key}={value} is out of range: {hint}")


def nodes_gpus(nodes: Any, per_node: Any) -> str:
    """The NnMg name of N nodes of M devices each, as the published tables and conf/dist/ name
    them: 1n1g, 2n8g, ... Every such name is made here."""
    return f"{nodes}n{per_node}g"


def world_size(cfg: DictConfig) -> int:
    """The run's processes: dist.nodes x dist.gpus_per_node (one per device)."""
    return cfg.dist.nodes * cfg.dist.gpus_per_node


def dist_name(cfg: DictConfig) -> str:
    """The run's dist as an NnMg name (nodes_gpus)."""
    return nodes_gpus(cfg.dist.nodes, cfg.dist.gpus_per_node)


def run_name(cfg: DictConfig) -> str:
    """An MLflow run's name: resnet50-amp-1n8g-bs256; resnet50-fp32-1n1g-bs8-cpu on CPUs, so that a
    CPU figure is never taken for a GPU one."""
    cpu = "-cpu" if cfg.dist.accelerator == Accelerator.cpu else ""
    return f"{cfg.model.arch.value}-{cfg.precision.name}-{dist_name(cfg)}-bs{cfg.data.batch_size}{cpu}"


AUTO_BATCH = "auto"


def is_auto(cfg) -> bool:
    """data.batch_size=auto: the rank searches for the batch size (rn50/rank/batch_search.py)."""
    return cfg.data.batch_size == AUTO_BATCH


DEFAULT_CLASSES = 1000
"""model.num_classes=null where the data has no class folders: ImageNet's classes."""
