"""python -m rn50: compose a run with Hydra, check it, record it in MLflow, launch its ranks.

This process is the launcher (rn50/launcher/): it never imports torch or Lightning; its ranks
do (rn50/rank/). docs/architecture.md follows one run through the modules it passes.
"""

import os
import sys
import time
from pathlib import Path
from typing import List, Optional

from rn50.measure import bytecode

bytecode.set_bytecode_cache()  # first: it saves compiling what follows, here and in the ranks

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from rn50 import STARTED, console
from rn50.config import docs
from rn50.config.directory import config_dir
from rn50.config.messages import reported
from rn50.errors import ConfigError
from rn50.launcher import rundir, stop
from rn50.launcher import run as launcher
from rn50.launcher.stop import PARENT_ENV
from rn50.options import clusters


@hydra.main(version_base="1.3", config_path=config_dir(), config_name="config")
def run(cfg: DictConfig) -> Optional[dict]:
    # Report here: an exception leaving the task makes Hydra print more than one line,
    # and in a sweep it would stop the remaining jobs and the report. A SLURM task of a
    # sweep is one rank of a point: its error goes on to the launcher in its JobReturn.
    sweep = HydraConfig.get().mode == RunMode.MULTIRUN
    try:
        cluster = clusters.of(cfg)  # built once here and handed on
    except ConfigError:  # a cluster that cannot be built: the checks say so, in one line
        cluster = None
    task = cluster is not None and cluster.in_task()
    with reported(exit=not sweep, reraise=task and sweep):
        parent = os.environ.get(PARENT_ENV)  # a job of a sweep: its parent run
        try:
            return launcher.benchmark(cfg, parent, started=time.time() if parent else STARTED, cluster=cluster)
        except ConfigError:
            if not sweep and not cfg.mlflow.run_id:  # refused before anything ran: no directory is left of it
                hydra_cfg = HydraConfig.get()
                rundir.discard_unused(Path(hydra_cfg.runtime.output_dir), rundir.given(hydra_cfg, "hydra.run.dir"))
            raise


def help_asked(argv: List[str]) -> bool:
    """Whether Hydra's parser reads --help in argv: --help as argparse lets it be shortened (--he),
    -h, or -h among other short flags (-mh)."""
    return any((len(a) > 3 and "--help".startswith(a)) or (a[:1] == "-" and a[1:2] != "-" and "h" in a)
               for a in argv)


def main() -> None:
    os.environ["HYDRA_FULL_ERROR"] = "1"  # errors reach `reported`, one line, not Hydra's printer
    console.quiet()
    docs.register_help(help_asked(sys.argv[1:]))  # --help's groups and keys, made only when asked for
    stop.on_signals()
    with stop.closing(), reported():
        run()


if __name__ == "__main__":
    main()
