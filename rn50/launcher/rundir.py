"""One run, one directory: the launcher takes its output directory (a sweep's, for a --multirun)
before Hydra writes into it, and lets go when the process ends.

Taking it is a lock (flock) on `.rn50-run` in the directory, held for the launcher's life and
released by the kernel whatever ends the process; the file says who holds it. A directory is
another run's while its launcher holds it, or once a run has kept its result there (result.json)
and this run does not resume it. Hydra's default directory (outputs/DATE/TIME, multirun/DATE/TIME)
is the same for runs started in the same second: the second gets TIME-2, and says so. A directory
given with hydra.run.dir or hydra.sweep.dir is the user's choice: one that is taken is refused, in
one line. Processes that torchrun or SLURM start are ranks of a run whose directory they share.
"""

import contextlib
import errno
import fcntl
import json
import os
import shutil
import sys
from pathlib import Path
from typing import List, Optional

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from rn50 import owner
from rn50.config.messages import reported
from rn50.errors import ConfigError, Rn50Error
from rn50.tracking.upload import RESULT_FILE

LOCK = ".rn50-run"
_held: List[int] = []  # this process's locks: open for its whole life


def take(directory: Path, resuming: bool = False) -> Optional[str]:
    """Take `directory` for this process: None when it is this run's now, else why not ('pid 42 on
    node1 uses it')."""
    made = not directory.exists()
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        return f"{owner.describe(holder)} uses it"
    if (directory / RESULT_FILE).is_file() and not resuming:
        os.close(fd)  # lets go of the lock
        return f"it holds the results of an earlier run ({RESULT_FILE})"
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(owner.me()).encode(), 0)
    except OSError:  # a full disk: nothing of this run stays there
        os.close(fd)
        (directory / LOCK).unlink(missing_ok=True)
        if made:
            directory.rmdir()
        raise
    _held.append(fd)
    return None


def _holder(fd: int) -> dict:
    """What the lock's holder wrote of itself; {} where it has not yet."""
    try:
        return json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (ValueError, OSError):
        return {}


def own(directory: Path, key: str, given: bool, resuming: bool = False) -> Path:
    """The directory this run writes to: `directory`, or where it is taken and Hydra's default made it,
    the first free `directory-N`. ConfigError, naming `key`, where the user gave one that is taken."""
    why = take(directory, resuming)
    if why is None:
        return directory
    if given:
        raise ConfigError(f"{key}={directory} is another run's: {why}; give each run its own directory")
    for n in range(2, 10_000):
        other = directory.with_name(f"{directory.name}-{n}")
        if take(other, resuming) is None:
            print(f"rn50: {directory} is another run's ({why}): this one's results go to {other}", file=sys.stderr)
            return other
    raise ConfigError(f"{key}={directory}: every directory from {directory.name}-2 on is taken")


def own_or_say(directory: Path, key: str, given: bool, resuming: bool = False) -> Path:
    """own(), with a directory that cannot be written (a full disk, no permission) as one line naming it."""
    try:
        return own(directory, key, given, resuming)
    except OSError as exc:
        raise Rn50Error(unwritable(directory, key, exc)) from None


def unwritable(directory: Path, key: str, exc: OSError) -> str:
    """'cannot write DIR: No space left on device; free space there or set KEY=/a/path/with/space'."""
    fix = "free space there or set" if exc.errno == errno.ENOSPC else "run from a writable directory or set"
    return f"cannot write {directory}: {exc.strerror}; {fix} {key}=/a/writable/path"


def discard_unused(directory: Path, given: bool) -> None:
    """A run refused before it started: remove what Hydra and this module put in its directory (its
    config, its log, the lock) and the directory once empty; in Hydra's default place
    (outputs/DATE/TIME) its date's folder and outputs/ too, where that leaves them empty. A directory
    that holds anything else (an earlier run's, which train.resume=true named; files of the user's)
    is left as it is."""
    ours = {".hydra", LOCK, "__main__.log"}
    if not directory.is_dir() or any(entry.name not in ours for entry in directory.iterdir()):
        return
    for name in ours:
        path = directory / name
        with contextlib.suppress(OSError):
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    for folder in [directory] if given else [directory, directory.parent, directory.parent.parent]:
        try:
            folder.rmdir()  # only where empty
        except OSError:
            return


def is_rank() -> bool:
    """A process torchrun or srun started: a rank of a run whose directory rank 0 of torchrun (or the
    launcher that submitted the SLURM job) took."""
    return "SLURM_STEP_ID" in os.environ or os.environ.get("RANK", "0") != "0"


def given(hydra: DictConfig, key: str) -> bool:
    """Whether the user set hydra.run.dir or hydra.sweep.dir (`key`) on the command line; hydra: the
    config's hydra node (HydraConfig.get())."""
    return any(o.split("=", 1)[0].lstrip("+~") == key for o in hydra.overrides.hydra)


class RunDirectory(Callback):
    """Registered in conf/config.yaml (hydra.callbacks, before the sweep's): each run, or each sweep, its
    own directory. Hydra turns a callback's exception into a warning and goes on, into the directory:
    a refusal here is its one line and exit status 2 (reported), before Hydra writes there."""

    def on_run_start(self, config: DictConfig, **kwargs) -> None:
        if is_rank():
            return
        wanted = Path(OmegaConf.select(config, "hydra.run.dir"))
        resuming = bool(OmegaConf.select(config, "train.resume", default=False))
        with reported():
            chosen = own_or_say(wanted, "hydra.run.dir", given(config.hydra, "hydra.run.dir"), resuming)
        if chosen != wanted:
            with read_write(config), open_dict(config):
                config.hydra.run.dir = str(chosen)

    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        if is_rank() or config.get("dry_run"):
            return
        wanted = Path(OmegaConf.select(config, "hydra.sweep.dir"))
        with reported():
            chosen = own_or_say(wanted, "hydra.sweep.dir", given(config.hydra, "hydra.sweep.dir"))
        if chosen != wanted:  # each job's config is composed again from hydra.overrides.hydra
            with read_write(config), open_dict(config):
                config.hydra.sweep.dir = str(chosen)
                config.hydra.overrides.hydra.append(f"hydra.sweep.dir={_quoted(str(chosen))}")


def _quoted(value: str) -> str:
    """A value as an override's right-hand side: quoted where Hydra's grammar would read more into it."""
    if all(c.isalnum() or c in "_./-" for c in value):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
