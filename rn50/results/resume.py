"""train=accuracy's resume: which checkpoint and which MLflow run a run continues.

The launcher writes run.json into the run's output directory as soon as the MLflow run is open
(its id and the config as params); the ranks write checkpoints/last.ckpt after every epoch,
and Lightning's SLURM requeue writes hpc_ckpt_N.ckpt there. `train.resume=true` in the same
output directory, or a SLURM job that SLURM requeued, continues from them. Nothing here
imports torch, so a bad resume is refused before any rank starts or any run opens.
"""

import json
import os
import zipfile
from pathlib import Path
from typing import Dict, Optional

from omegaconf import DictConfig

from rn50.config.schema import TrainName
from rn50.errors import ConfigError
from rn50.point.identity import MAY_DIFFER_ON_RESUME, current_params, leaves_out

RUN_FILE = "run.json"
CHECKPOINT_DIR = "checkpoints"
LAST = "last.ckpt"
# Keys that may differ between a run and its resumption: rn50/point/identity.py's MAY_DIFFER_ON_RESUME.
MAY_DIFFER = MAY_DIFFER_ON_RESUME


def requeued() -> bool:
    """A SLURM job that SLURM started again (Lightning's requeue on the signal, or a preemption)."""
    return int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0) > 0


def wanted(cfg: DictConfig) -> bool:
    return cfg.train.name == TrainName.accuracy and (cfg.train.resume or requeued())


def last_checkpoint(out: Path) -> Optional[Path]:
    path = Path(out) / CHECKPOINT_DIR / LAST
    return path if path.is_file() else None


def hpc_checkpoint(out: Path) -> Optional[Path]:
    """The newest checkpoint Lightning's SLURM requeue wrote (it resumes from it by itself)."""
    found = sorted(Path(out).glob("hpc_ckpt_*.ckpt"), key=lambda p: int(p.stem.rsplit("_", 1)[1]))
    return found[-1] if found else None


def broken(checkpoint: Path) -> Optional[str]:
    """Why a checkpoint torch.save wrote cannot be loaded whole, read without torch; None where it can.
    torch.save writes a zip archive: a file cut short (a full disk, a copy stopped halfway, a job
    killed while saving) has lost the directory at its end, or holds less than it lists."""
    try:
        with zipfile.ZipFile(checkpoint) as archive:
            entries = archive.infolist()
    except (zipfile.BadZipFile, OSError) as exc:
        return f"not a whole checkpoint: {exc}"
    size = checkpoint.stat().st_size
    short = [e.filename for e in entries if e.header_offset + e.compress_size > size]
    if short or not entries:
        return f"not a whole checkpoint: {short[0] if short else 'no entries'} is cut short"
    return None


def run_to_continue(cfg: DictConfig, out: Path, params: Dict[str, str]) -> Optional[str]:
    """The MLflow run id to continue, or None for a new run; ConfigError when resuming cannot work.
    params: this run's config as MLflow params (tracking.runs.config_params)."""
    if not wanted(cfg):
        return None
    out = Path(out)
    has_checkpoint = last_checkpoint(out) or hpc_checkpoint(out)
    info = out / RUN_FILE
    if cfg.train.resume and not has_checkpoint:
        raise ConfigError(f"train.resume=true but {out / CHECKPOINT_DIR / LAST} does not exist; run the same "
                          "command with hydra.run.dir set to the first run's output directory, which holds "
                          "checkpoints/ after its first epoch, or drop train.resume")
    damaged = broken(last_checkpoint(out)) if last_checkpoint(out) else None
    if damaged:
        raise ConfigError(f"train.resume=true: {out / CHECKPOINT_DIR / LAST} is damaged ({damaged}); resume "
                          "from a copy of it that is whole, or start afresh: drop train.resume, or give "
                          "hydra.run.dir a new directory")
    if not info.is_file():
        if has_checkpoint:
            raise ConfigError(f"train.resume=true: {out} has a checkpoint but no {RUN_FILE}, so neither its "
                              "config nor its MLflow run is known; start a new run in another hydra.run.dir")
        return None  # requeued before the first run was even recorded
    before = json.loads(info.read_text())
    old = current_params(before["params"])  # a checkpoint's run.json from before issue 28 names its options' old paths
    # Keys only one side has came or went with an rn50 version (data._target_, model.autotune_*):
    # a checkpoint written before them still resumes.
    changed = sorted(k for k in set(old) & set(params) if not leaves_out(k, MAY_DIFFER) and old[k] != params[k])
    if changed:
        what = ", ".join(f"{k}={old[k]}" for k in changed[:3])
        now = ", ".join(f"{k}={params[k]}" for k in changed[:3])
        raise ConfigError(f"train.resume=true: the checkpoint in {out} was trained with {what}, not {now}; "
                          "resume with that run's config, or start a new run in another hydra.run.dir")
    return before["run_id"]


def remember(out: Path, run_id: str, params: Dict[str, str]) -> None:
    """run.json: what a later train.resume=true (or a SLURM requeue) checks and continues."""
    (Path(out) / RUN_FILE).write_text(json.dumps({"run_id": run_id, "params": params}, indent=1) + "\n")
