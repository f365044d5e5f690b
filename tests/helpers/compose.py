"""The config `python -m rn50 OVERRIDES` composes, as Hydra composes it: compose_as_hydra (the
compose_cfg fixture), and Hydra's own compose (composed_by_hydra) that tests/unit/test_compose_helper.py
compares it with."""
import copy
import functools

from hydra import compose, initialize_config_dir
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser

import rn50.config.schema  # noqa: F401  registers the schema Hydra composes into
from helpers import CONF


@functools.lru_cache(maxsize=None)
def composed_by_hydra(overrides: tuple):
    """Hydra's compose of conf/config.yaml with these overrides, once a session for each tuple: shared,
    so never to be changed (compose_as_hydra hands out copies)."""
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


@functools.lru_cache(maxsize=None)
def _is_group(key: str) -> bool:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return GlobalHydra.instance().config_loader().repository.group_exists(key)


def compose_as_hydra(overrides=()):
    """The config `python -m rn50 OVERRIDES` composes, as Hydra composes it, in a tenth of the time.

    Hydra (defaults_list.Overrides) takes the overrides that choose a config group, with a name rather
    than a dict for a value, to build the defaults list; composes it; then sets every other override on the
    result in the order given (ConfigLoaderImpl._apply_overrides_to_config). Here the first part is
    composed once a session for each set of choices, and the rest is set on a copy with Hydra's own
    function. Overrides that change that path are composed whole, as Hydra composes them: sweeps (which
    Hydra refuses here), Hydra's own keys and groups (hydra.searchpath adds groups; cfg.hydra is not
    kept), and packages (key@package). tests/unit/test_compose_helper.py compares the two."""
    parsed = OverridesParser.create().parse_overrides(list(overrides))
    if any(o.is_sweep_override() or o.is_hydra_override() or o.package is not None for o in parsed):
        return copy.deepcopy(composed_by_hydra(tuple(overrides)))
    chooses = [_is_group(o.key_or_group) and not isinstance(o.value(), dict) for o in parsed]
    cfg = copy.deepcopy(composed_by_hydra(tuple(o.input_line for o, c in zip(parsed, chooses) if c)))
    ConfigLoaderImpl._apply_overrides_to_config([o for o, c in zip(parsed, chooses) if not c], cfg)
    return cfg
