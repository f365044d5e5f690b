"""A resolved config typed again (what a rank, a SLURM job and a tool read from resolved YAML), and a
config with what was decided after composing it (decided)."""

import dataclasses
from copy import deepcopy
from typing import Any, Dict

from hydra.core.plugins import Plugins
from omegaconf import DictConfig, OmegaConf

from rn50.config import keys
from rn50.config.schema import Rn50Config


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
