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
from typing import Dict, Optional, Tuple

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from rn50.measure import host
from rn50.config import keys
from rn50.config.messages import reported
from rn50.errors import ConfigError, Rn50Error
from rn50.tracking.upload import RESULT_FILE

LOCK = ".rn50-run"
# What marks a directory as an earlier run's, or an earlier sweep's (Hydra writes multirun.yaml first).
FINISHED_MARKS = (RESULT_FILE, "multirun.yaml")
# File systems that take no flock (Lustre without flock, NFS with nolock, some FUSE): no lock there.
NO_LOCKS = (errno.ENOSYS, errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL)
_taken: Dict[Path, Tuple[int, bool]] = {}  # what this process took: its lock, open for its whole life, and
                                           # whether it made the directory


def taken() -> Optional[Path]:
    """The directory this process took last, where it took one."""
    return next(reversed(_taken), None)


def take(directory: Path, resuming: bool = False) -> Optional[str]:
    """Take `directory` for this process: None when it is this run's now, else why not ('pid 42 on
    node1 uses it'). OSError where it cannot be written."""
    made = not directory.exists()
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        return f"{host.describe_owner(holder)} uses it"
    except OSError as exc:
        if exc.errno not in NO_LOCKS:
            os.close(fd)
            raise
    mark = next((m for m in FINISHED_MARKS if (directory / m).is_file()), None)
    if mark and not resuming:
        os.close(fd)  # lets go of the lock
        return f"it holds the results of an earlier {'sweep' if mark == 'multirun.yaml' else 'run'} ({mark})"
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(host.this_process()).encode(), 0)
    except OSError:  # a full disk: nothing of this run stays there
        os.close(fd)
        (directory / LOCK).unlink(missing_ok=True)
        if made:
            directory.rmdir()
        raise
    _taken[directory.resolve()] = (fd, made)
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


# The errors of a write that the directory's disk refused (not a network's, which requests' are too).
UNWRITABLE = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM)


def unwritable(directory: Path, key: str, exc: OSError) -> str:
    """'cannot write DIR: No space left on device; free space there or set KEY=/a/path/with/space'."""
    fix = "free space there or set" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else \
        "run from a writable directory or set"
    return f"cannot write {directory}: {exc.strerror}; {fix} {key}=/a/writable/path"


def discard_unused(directory: Path, given: bool) -> None:
    """A run refused before it started: remove what Hydra and this module put in its directory (its
    config, its log, the lock) and the directory once empty; in Hydra's default place
    (outputs/DATE/TIME) its date's folder and outputs/ too, where that leaves them empty. A directory
    that holds anything else (an earlier run's, which train.resume=true named; files of the user's)
    is left as it is."""
    ours = {".hydra", LOCK, "__main__.log"}
    directory = directory.resolve()
    if directory not in _taken or not directory.is_dir() or any(e.name not in ours for e in directory.iterdir()):
        return  # not this process's (a torchrun rank's), or it holds more than this run wrote
    for name in ours:
        path = directory / name
        with contextlib.suppress(OSError):
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    if not _taken[directory][1]:  # a directory that was there before the run stays
        return
    for folder in [directory] if given else [directory, directory.parent, directory.parent.parent]:
        try:
            folder.rmdir()  # only where empty
        except OSError:
            return


def is_rank() -> bool:
    """A process torchrun or srun started: a rank of a run whose directory its starter named for the
    run (torchrun's rendezvous id; the SLURM job's, which the launcher that submitted it took), and
    which every rank of it shares."""
    return "SLURM_STEP_ID" in os.environ or "RANK" in os.environ or "TORCHELASTIC_RUN_ID" in os.environ


def given(hydra: DictConfig, key: str) -> bool:
    """Whether the user set hydra.run.dir or hydra.sweep.dir (`key`) on the command line; hydra: the
    config's hydra node (HydraConfig.get())."""
    return any(o.split("=", 1)[0].lstrip("+~") == key for o in hydra.overrides.hydra)


class RunDirectory(Callback):
    """Registered in conf/config.yaml (hydra.callbacks, before the sweep's): each run, or each sweep, its
    own directory. Hydra turns a callback's exception into a warning and goes on, into the directory:
    a refusal here is its one line and exit status 2 (reported), before Hydra writes there."""

    def on_run_start(self, config: DictConfig, **kwargs) -> None:
        if is_rank() or config.get("dry_run"):  # a dry run writes nothing there
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
            chosen = own_or_say(wanted, "hydra.sweep.dir", given(config.hydra, "hydra.sweep.dir"),
                                resuming=bool(OmegaConf.select(config, "sweep.resume", default=False)))
        if chosen != wanted:  # each job's config is composed again from hydra.overrides.hydra
            with read_write(config), open_dict(config):
                config.hydra.sweep.dir = str(chosen)
                config.hydra.overrides.hydra.append(f"hydra.sweep.dir={keys.quoted(str(chosen))}")
