"""A rank in the process that torchrun or SLURM started (cluster=torchrun, cluster=slurm): the
launcher's process becomes the rank, its output in the rank's log."""

import os
import traceback
from pathlib import Path
from typing import Optional

from omegaconf import DictConfig

from rn50 import console
from rn50.distributed import peers
from rn50.errors import Requeued, RunFailed
from rn50.options.components import Options
from rn50.rank.run import failure, leave_process_group, run_rank
from rn50.results import resume
from rn50.wire import rank_log


def run_rank_here(cfg: DictConfig, out: Path, options: Options) -> Optional[list]:
    """Run this process's rank, its output in its log (wire.rank_log); rank 0 returns every rank's
    result. Failures become RunFailed, whose line names the log and the rank and node a failed
    collective lost; a job the scheduler requeued while it ran raises Requeued instead, whatever
    broke as it was stopped (it starts again and resumes). options: the run's, from preflight."""
    cluster = options.cluster
    rank = int(os.environ.get((cluster.rank_env or ("RANK",))[0], 0))
    with console.stderr_to(rank_log(out, rank)) as log:
        try:
            ranks = run_rank(cfg, out, options)
            leave_process_group()
            return ranks
        except (Requeued, KeyboardInterrupt):
            raise
        except BaseException as exc:  # also Lightning's SIGTERMException, a SystemExit
            if cluster.requeued():
                raise Requeued(str(resume.last_checkpoint(out) or "")) from None
            if not isinstance(exc, Exception):
                raise
            traceback.print_exc()  # into the log
            failed = failure(exc, cfg, log)
            lost = peers.lost(failed.message)
            # submitit raises UncompletedJobError in rank 0 when SLURM times the job out or preempts it.
            kind = "slurm" if type(exc).__name__ == "UncompletedJobError" else "lost_rank" if lost else failed.kind
            raise RunFailed(f"rank {rank} failed: {lost or failed.message}", kind=kind, log=failed.log) from exc
