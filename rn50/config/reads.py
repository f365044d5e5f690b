"""What the launcher and the ranks read off a composed config beyond its keys: the world size, the NnMg
name of a dist, a run's name, whether its batch is searched, the class count with no class folders, and
the one-line range check (positive) that every option's checks use. Also a resolved config typed again
(typed: what a rank, a SLURM job and a tool read from resolved YAML), and a config with what was
decided after composing it (decided). The keys themselves are rn50/config/schema.py's."""

import dataclasses
from copy import deepcopy
from typing import Any, Dict

from hydra.core.plugins import Plugins
from omegaconf import DictConfig, OmegaConf

from rn50.config import keys
from rn50.config.schema import Accelerator, Rn50Config
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


def typed(tree: Any) -> DictConfig:
    """A resolved config (a dict, or YAML text) typed again as Rn50Config, with each group typed by
    its option's own schema (precision=amp_static: AmpStaticConfig), as composing typed it."""
    # Hydra imports every module of the hydra_plugins namespace before it composes, which is where a
    # user's option registers its own schema (docs/extending.md: Adding a profiler); a rank must see it too.
    Plugins.instance()
    cfg = OmegaConf.create(tree)
    schema = OmegaConf.structured(Rn50Config)
    for group in {g for g, _, _ in keys.option_schemas()}:
        # The schema with the fewest keys that has all of the node's: an option of the user's may
        # name a built-in one's schema (a profiler with the pytorch profiler's keys).
        have = set(cfg[group].keys()) if group in cfg else set()
        schemas = [OmegaConf.get_type(schema[group])] + [c for g, _, c in keys.option_schemas() if g == group]
        fits = [c for c in schemas if have <= {f.name for f in dataclasses.fields(c)}]
        if fits:
            schema[group] = OmegaConf.structured(min(fits, key=lambda c: len(dataclasses.fields(c))))
    return OmegaConf.merge(schema, cfg)


def decided(cfg: DictConfig, changes: Dict[str, Any]) -> DictConfig:
    """A copy of cfg with `changes` (dotted keys) set, read-only: how a decision made after composing
    (this host's accelerator, the data's classes, the batch a search chose) is handed on. cfg itself is
    never written, so what was composed and what was decided stay apart, and a later write fails."""
    copy = deepcopy(cfg)
    OmegaConf.set_readonly(copy, False)
    for key, value in changes.items():
        OmegaConf.update(copy, key, value, merge=False)
    OmegaConf.set_readonly(copy, True)
    return copy
