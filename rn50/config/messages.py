"""The one line a user reads for an error: rn50's own errors as they are, and Hydra's and
OmegaConf's for a key or option that does not compose, with the closest key or option.
`reported` prints that line as `prog: error: ...` and exits non-zero."""

import contextlib
import re
import sys

from hydra.errors import HydraException, MissingConfigException
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException, ValidationError

from rn50.config import keys
from rn50.errors import Rn50Error, RunFailed


def one_line(exc: BaseException) -> str:
    """An exception as rn50's one-line error: a config error names the key and what would work."""

    if isinstance(exc, MissingConfigException) and exc.options:
        return unknown_option_message(exc.missing_cfg_file or "", exc.options)
    cause = exc.__cause__ if isinstance(exc.__cause__, OmegaConfBaseException) else exc
    if isinstance(cause, OmegaConfBaseException):
        key = getattr(cause, "full_key", None)
        msg = str(cause).splitlines()[0]
        if isinstance(cause, (ConfigAttributeError, ConfigKeyError)) and key:
            typed, append = _override(exc)
            if (typed or key).startswith("hydra."):  # Hydra's own config: its node lists the keys
                return hydra_key_message(typed or key, getattr(cause, "parent_node", None))
            return unknown_key_message(typed or key, append, fallback=f"{key}: {msg}")
        if isinstance(cause, ValidationError) and key and getattr(cause, "value", None) is not None:
            wrong_option = bad_value_message(key, cause.value)
            if wrong_option:
                return wrong_option
        return f"{key}: {msg}" if key else msg
    return " ".join(str(exc).split())


def _override(exc: BaseException):
    """The key as the user typed it, and the override that would add it: Hydra says "Could not
    override 'dat.batch_size'. To append to your config use +dat.batch_size=8" while OmegaConf
    names only the first part it could not find ('dat')."""
    typed = re.match(r"Could not override '([^']+)'", str(exc))
    append = re.search(r"To append to your config use (\S+)", str(exc))
    return (typed.group(1) if typed else ""), (append.group(1) if append else "")


def unknown_key_message(key: str, append: str = "", fallback: str = "") -> str:
    """'data.batch_sze: no such key; did you mean data.batch_size?', or what else would work.

    append: the override that adds the key (+key=value), for the tables whose keys are the
    user's own. fallback: the message for a key the schema does declare.
    """
    free_form = keys.free_form_parent(key)
    if free_form:  # the user's own table: any name may be right, so none is suggested
        return f"{key}: not in {free_form} yet; add it with {append or f'+{key}=VALUE'}"
    owners = keys.options_with(key)
    if key in keys.schema_keys() and not owners:
        return fallback or f"{key}: cannot be set here"
    if owners:
        names = [f"{key.partition('.')[0]}={o}" for o in owners]
        return f"{key} is a key of {' and '.join(names)} only; add {names[0] if len(names) == 1 else 'one of them'}"
    suggestion = keys.closest_key(key)
    if suggestion:
        return f"{key}: no such key; did you mean {suggestion}?"
    section = key.rpartition(".")[0]
    if section in keys.schema_keys():
        return f"{key}: no such key; {section} has: {', '.join(keys.children(section))}"
    return f"{key}: no such key; `python -m rn50 --cfg job` prints every key"


def hydra_key_message(key: str, parent) -> str:
    """A mistyped key of Hydra's own config (hydra.run.dri), suggested from the node it is missing from."""

    section, _, name = key.rpartition(".")
    names = [str(k) for k in parent.keys()] if hasattr(parent, "keys") else []
    suggestion = keys.closest(name, names)
    if suggestion:
        return f"{key}: no such key; did you mean {section}.{suggestion}?"
    return f"{key}: no such key; `python -m rn50 --cfg hydra` prints Hydra's keys"


def unknown_option_message(missing_cfg_file: str, options) -> str:
    """'precision=amp16 is not an option; did you mean amp? precision is one of: amp, ...'."""
    group, _, option = missing_cfg_file.rpartition("/")
    suggestion = keys.closest(option, options)
    hint = f"did you mean {suggestion}? " if suggestion else ""
    return f"{group}={option} is not an option; {hint}{group} is one of: {', '.join(sorted(options))}"


def bad_value_message(key: str, value) -> str:
    """'model.arch=resnet5 is not an option; did you mean resnet50? model.arch is one of: ...' for
    a key with fixed names (an Enum); empty for any other key."""
    options = keys.enum_options(key)
    if not options or str(value) in options:
        return ""
    suggestion = keys.closest(str(value), options)
    hint = f"did you mean {suggestion}? " if suggestion else ""
    return f"{key}={value} is not an option; {hint}{key} is one of: {', '.join(options)}"


@contextlib.contextmanager
def reported(prog: str = "rn50", exit: bool = True, reraise: bool = False):
    """Turn known errors into `prog: error: <one line>` and exit status 2 (1 for a failed run).

    With exit=False the error is printed and swallowed, so a sweep goes on to its next job.
    With reraise=True it is printed and raised on, for a caller that must see it fail.
    """
    try:
        yield
    except (Rn50Error, HydraException, OmegaConfBaseException) as exc:
        print(f"{prog}: error: {one_line(exc)}", file=sys.stderr)
        if reraise:
            raise
        if exit:
            sys.exit(1 if isinstance(exc, RunFailed) else 2)
