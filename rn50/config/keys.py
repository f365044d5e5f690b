"""The schema's dotted keys, and the closest key or option to a typo.

Keys come from the dataclasses in rn50/config/schema.py, so a new field is suggested
without a list to keep up. The keys under a dict-typed field (cluster.sbatch,
mfu.peaks, profiler.metrics) are the user's own: nothing is suggested there.
"""

import dataclasses
import enum
import functools
import re
import typing
from difflib import SequenceMatcher
from typing import Dict, Iterable, List, Optional, Tuple

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from rn50.config.schema import Rn50Config  # importing the schema registers the options' own schemas

# Below this similarity a "did you mean" misleads more than it helps: at difflib's default of
# 0.6, data.colour would suggest data.root.
CUTOFF = 0.7


def _walk(cls, prefix: str, keys: Dict[str, type]) -> Dict[str, type]:
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        key, kind = prefix + f.name, _unwrap_optional(hints[f.name])
        keys[key] = kind
        if dataclasses.is_dataclass(kind):
            _walk(kind, key + ".", keys)
    return keys


@functools.lru_cache(maxsize=None)
def base_keys() -> Dict[str, type]:
    """Every dotted key of Rn50Config, sections included ('data', 'data.batch_size'), with its type."""
    return _walk(Rn50Config, "", {})


@functools.lru_cache(maxsize=None)
def option_schemas() -> List[Tuple[str, str, type]]:
    """(group, option, dataclass) of each option's own schema, as ConfigStore's schema/<group>
    holds them for the options' YAML files to name: ('precision', 'amp_static', AmpStaticConfig)."""
    store, found = ConfigStore.instance(), []
    for group in store.list("schema"):
        for entry in store.list(f"schema/{group}"):
            node = store.load(f"schema/{group}/{entry}").node
            found.append((group, entry.removesuffix(".yaml"), OmegaConf.get_type(node)))
    return found


@functools.lru_cache(maxsize=None)
def schema_keys() -> Dict[str, type]:
    """base_keys() and the keys of every option's own schema (precision.loss_scale)."""
    keys = dict(base_keys())
    for group, _, cls in option_schemas():
        _walk(cls, group + ".", keys)
    return keys


def _unwrap_optional(kind):
    args = [a for a in typing.get_args(kind) if a is not type(None)]
    return args[0] if typing.get_origin(kind) is typing.Union and len(args) == 1 else kind


def _is_free_form(kind) -> bool:
    return typing.get_origin(kind) in (dict, typing.Dict) or kind in (dict, typing.Dict)


def free_form_parent(key: str) -> Optional[str]:
    """The dict-typed field that holds key ('cluster.sbatch' for 'cluster.sbatch.constraint'), if any."""
    parts = key.split(".")
    for end in range(1, len(parts)):
        parent = ".".join(parts[:end])
        if _is_free_form(schema_keys().get(parent)):
            return parent
    return None


def enum_options(key: str) -> Optional[List[str]]:
    """The allowed names of an Enum-typed key, or None for any other key."""
    kind = schema_keys().get(key)
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return [member.value for member in kind]
    return None


def closest(word: str, choices: Iterable[str]) -> Optional[str]:
    """The one choice most like word, or None when none is close or several are equally close."""
    scored = sorted(((SequenceMatcher(None, word, c).ratio(), c) for c in choices), reverse=True)
    if not scored or scored[0][0] < CUTOFF or (len(scored) > 1 and scored[1][0] == scored[0][0]):
        return None
    return scored[0][1]


def children(section: str) -> List[str]:
    """The names directly under a section key ('' for the top level)."""
    prefix = section + "." if section else ""
    # Hydra's own keys (data._target_) are not the user's to set: left out of the list.
    return [k[len(prefix):] for k in schema_keys()
            if k.startswith(prefix) and "." not in k[len(prefix):] and not k[len(prefix):].startswith("_")]


def options_with(key: str) -> List[str]:
    """The options whose own schema declares a key that the group's shared schema does not:
    ['amp_static'] for precision.loss_scale."""
    if key in base_keys():
        return []
    group, _, name = key.partition(".")
    return sorted(option for g, option, cls in option_schemas()
                  if g == group and name.partition(".")[0] in {f.name for f in dataclasses.fields(cls)})


def closest_key(key: str) -> Optional[str]:
    """The declared dotted key a mistyped one most likely meant.

    Tried in turn: each part against the names at its level (data.batch_sze and
    dat.batch_size -> data.batch_size), then the last part against every key's last
    part (batch_size and bench.batch_size -> data.batch_size). Whole dotted names are
    not compared: their shared section would make any two keys of a section look alike.
    """
    resolved = _resolve_parts(key.split("."))
    if resolved:
        return resolved
    name = key.rpartition(".")[2]
    by_name: Dict[str, List[str]] = {}
    for k in schema_keys():
        by_name.setdefault(k.rpartition(".")[2], []).append(k)
    match = name if name in by_name else closest(name, by_name)
    return by_name[match][0] if match and len(by_name[match]) == 1 else None


def _resolve_parts(parts: List[str]) -> Optional[str]:
    section = ""
    for part in parts:
        names = children(section)
        found = part if part in names else closest(part, names)
        if found is None:
            return None
        section = f"{section}.{found}" if section else found
    return section


def undeclared_keys(cfg, prefix: str = "") -> List[str]:
    """Dotted keys in a composed config that its schema does not declare.

    Hydra's `+key=value` adds a key even to a typed section, so a typo with a plus sign composes
    and would fail only later, inside a rank. Each section is checked against its own type, which
    for an option with its own schema is that schema: +precision.loss_scale under precision=amp
    is undeclared there, though amp_static has it.
    """
    kind = OmegaConf.get_type(cfg)
    if not dataclasses.is_dataclass(kind):  # a dict-typed field (cluster.sbatch): the user's own keys
        return []
    declared = {f.name for f in dataclasses.fields(kind)}
    found = []
    for name in cfg.keys():
        key = prefix + str(name)
        if key == "hydra":  # Hydra's own node, in the configs a launcher loads for each job
            continue
        if name not in declared:
            found.append(key)
        elif isinstance(cfg._get_node(name), DictConfig):
            found += undeclared_keys(cfg[name], key + ".")
    return found


def quoted(value: str) -> str:
    """A value as an override's right-hand side, quoted as Hydra's grammar reads it back: a backslash
    escapes only a quote or the closing quote."""
    return "'" + re.sub(r"(\\*)('|$)", lambda m: 2 * m[1] + ("\\'" if m[2] else ""), value) + "'"
