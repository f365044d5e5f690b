"""rn50's config groups and keys as text, generated so that it cannot go stale.

One text serves two readers: docs/configuration.md (`python -m rn50.config_docs > docs/configuration.md`;
tests/unit/test_config_docs.py fails when the page differs from this module's output) and
`python -m rn50 --help`, whose template (conf/hydra/help/rn50.yaml) calls the `rn50_help` resolver
registered here. The groups and their options come from conf/; an option's line is the first comment
line of its YAML file (after `# @package`). Every key comes from rn50/config/schema.py's dataclasses: its
type, its default as composed and its docstring. No torch: the launcher answers --help.
"""

import ast
import dataclasses
import enum
import functools
import inspect
import sys
import textwrap
import typing
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import yaml
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf

from rn50.config import keys
from rn50.config.directory import config_dir
from rn50.config.schema import Rn50Config

HELP_RESOLVER = "rn50_help"
# Groups of conf/ that are not a run's choice: Hydra's own (hydra/help holds --help's template).
NOT_GROUPS = ("hydra",)
WIDTH = 100


@dataclasses.dataclass
class Option:
    name: str
    line: str
    default: bool


@dataclasses.dataclass
class Key:
    key: str
    kind: str
    default: str
    doc: str


def option_line(path: Path) -> str:
    """An option's one line: the first comment line of its YAML, `# @package` aside."""
    for line in path.read_text().splitlines():
        text = line.strip()
        if not text.startswith("#"):
            break
        text = text.lstrip("#").strip()
        if text and not text.startswith("@package"):
            return text
    raise ValueError(f"{path}: its first comment line is the option's line in --help and "
                     "docs/configuration.md; add one")


def groups(conf: Path) -> Dict[str, List[Option]]:
    """Each config group of conf/ with its options, the default one marked (conf/config.yaml)."""
    chosen = {}
    for entry in yaml.safe_load((conf / "config.yaml").read_text())["defaults"]:
        if isinstance(entry, dict):
            (group, option), = entry.items()
            chosen[group.removeprefix("optional ").strip()] = option
    found = {}
    for folder in sorted(p for p in conf.iterdir() if p.is_dir() and p.name not in NOT_GROUPS):
        options = sorted(folder.glob("*.yaml"), key=lambda p: (p.stem != chosen.get(folder.name), p.stem))
        found[folder.name] = [Option(p.stem, option_line(p), p.stem == chosen.get(folder.name)) for p in options]
    return found


@functools.lru_cache(maxsize=None)
def _classes(module: str) -> Dict[str, ast.ClassDef]:
    """A module's classes by qualified name, parsed once (inspect.getsource parses it per class)."""
    found = {}

    def walk(nodes, prefix):
        for node in nodes:
            if isinstance(node, ast.ClassDef):
                found[prefix + node.name] = node
                walk(node.body, f"{prefix}{node.name}.")

    walk(ast.parse(inspect.getsource(sys.modules[module])).body, "")
    return found


@functools.lru_cache(maxsize=None)
def field_docs(cls: type) -> Dict[str, str]:
    """The docstring under each field of a dataclass (a string literal right after the field)."""
    docs = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        body = _classes(klass.__module__)[klass.__qualname__].body
        for node, after in zip(body, body[1:]):
            if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                    and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                    and isinstance(after.value.value, str)):
                docs[node.target.id] = " ".join(inspect.cleandoc(after.value.value).split())
    return docs


def kind_name(kind: Any) -> str:
    """A field's type as a user writes its value: int, float or null, one of: a, b."""
    args = [a for a in typing.get_args(kind) if a is not type(None)]
    if typing.get_origin(kind) is typing.Union and len(args) == 1:
        return kind_name(args[0]) + " or null"
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return "one of: " + ", ".join(m.value for m in kind)
    if typing.get_origin(kind) in (dict, typing.Dict):
        return "mapping"
    if kind is Any:
        return "any"
    return getattr(kind, "__name__", str(kind))


def shown(value: Any) -> str:
    """A default as it is written on the command line; a table by its size."""
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, dict):
        return f"{len(value)} entries (python -m rn50 --cfg job shows them)" if value else "{}"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def _fields(cls: type, prefix: str) -> Iterator[Tuple[str, dataclasses.Field, type]]:
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints[f.name]):  # a section: data.dali
            yield from _fields(hints[f.name], f"{prefix}{f.name}.")
        else:
            yield prefix + f.name, f, hints[f.name]


def _schema_default(f: dataclasses.Field) -> Any:
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


def _lookup(tree: Dict[str, Any], dotted: str) -> Any:
    value: Any = tree
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            return dataclasses.MISSING
        value = value[part]
    return value


def schema_keys(composed: Dict[str, Any]) -> Dict[str, List[Key]]:
    """Every key, by section ('model', 'data.dali', ..., 'precision=amp_static'), with its type,
    its default as composed (the schema's where the composed config lacks it) and its docstring."""
    sections: Dict[str, List[Key]] = {}

    def add(cls: type, prefix: str, section: Optional[str] = None, skip=()):
        for dotted, f, kind in _fields(cls, prefix):
            if dotted in skip:
                continue
            value = _lookup(composed, dotted)
            default = _schema_default(f) if value is dataclasses.MISSING else value
            doc = _doc_of(cls, dotted[len(prefix):])
            where = section or (dotted.rsplit(".", 1)[0] if "." in dotted else "top level")
            sections.setdefault(where, []).append(Key(dotted, kind_name(kind), shown(default), doc))

    add(Rn50Config, "")
    base = {dotted for dotted, _, _ in _fields(Rn50Config, "")}
    for group, option, cls in keys.option_schemas():
        add(cls, f"{group}.", section=f"{group}={option}", skip=base)
    return sections


def _doc_of(cls: type, relative: str) -> str:
    """The docstring of a (nested) field, relative to cls: 'dali.num_threads' of DataConfig."""
    *path, name = relative.split(".")
    for part in path:
        cls = typing.get_type_hints(cls)[part]
    return field_docs(cls).get(name, "")


def _wrap(text: str, first: str, rest: str) -> List[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=first, subsequent_indent=rest,
                         break_on_hyphens=False, break_long_words=False) or [first.rstrip()]


def text(cfg: DictConfig, conf: Optional[Path] = None, markdown: bool = True) -> str:
    """The groups and the keys: Markdown for docs/configuration.md, plain text for --help."""
    conf = conf or Path(config_dir())
    code = (lambda s: f"`{s}`") if markdown else (lambda s: s)
    heading = (lambda s: f"### {s}\n") if markdown else (lambda s: f"{s}:")
    item, more = ("- ", "  ") if markdown else ("  ", "      ")
    composed = OmegaConf.to_container(cfg, resolve=False, enum_to_str=True)
    out = ["## Config groups" if markdown else "CONFIG GROUPS", ""]
    out += _wrap("Choose one option of a group with group=option; each YAML file in conf/<group>/ is an "
                 "option, and hydra.searchpath adds your own (docs/extending.md).", "", "")
    out.append("")
    for group, options in groups(conf).items():
        out.append(heading(group))
        for option in options:
            name = code(f"{group}={option.name}") + (" (default)" if option.default else "")
            out += _wrap(f"{name}: {option.line}", item, more)
        out.append("")
    out += ["## Keys" if markdown else "KEYS", ""]
    out += _wrap("Every key is typed in rn50/config/schema.py: its type, its default as `python -m rn50` composes it, "
                 "and its docstring. Set one with key=value; a wrong value or an unknown key is a one-line "
                 "error before anything starts. A group=option section lists the keys only that option has.",
                 "", "")
    out.append("")
    for section, entries in schema_keys(composed).items():
        out.append(heading(section))
        for k in entries:
            out += _wrap(f"{code(k.key)} ({k.kind}; default {code(k.default)}): {k.doc}", item, more)
        out.append("")
    return "\n".join(out).rstrip() + "\n"


PAGE_HEAD = """# Configuration

Generated by `python -m rn50.config_docs > docs/configuration.md` from conf/ and rn50/config/schema.py;
tests/unit/test_config_docs.py fails when this page differs from the generator's output, so edit the
docstrings and the YAML files' first comment lines, not this page. `python -m rn50 --help` prints the
same text; `python -m rn50 --cfg job` prints a composed config.

"""


def compose_default() -> DictConfig:
    """The config `python -m rn50` composes with no overrides (before device=auto looks at the host)."""
    with initialize_config_dir(config_dir=config_dir(), version_base="1.3"):
        return compose(config_name="config")


def page() -> str:
    return PAGE_HEAD + text(compose_default())


def help_text(*, _root_: DictConfig) -> str:
    """--help's groups and keys, for the config --help composed (its overrides included); `$` doubled
    for Hydra's string.Template, which fills in the template after OmegaConf resolves it."""
    return text(_root_, markdown=False).replace("$", "$$").rstrip()


def register_help(asked: bool = True) -> None:
    """Lets conf/hydra/help/rn50.yaml's template say ${rn50_help:}: the groups and keys where --help is
    asked for, else nothing, since Hydra resolves the template on every run (replacing an earlier
    run's resolver in the same process)."""
    OmegaConf.register_new_resolver(HELP_RESOLVER, help_text if asked else lambda: "", replace=True)


if __name__ == "__main__":
    print(page(), end="")
