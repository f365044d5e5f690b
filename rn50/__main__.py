"""python -m rn50: compose a run, start its processes, record it in MLflow.

The processes (rn50/worker.py) build the model, fit, measure and log the
figures; this process owns the MLflow run, so a run whose processes crash,
run out of memory or are interrupted is still closed with the right status.
"""

import json
import logging
import os
import socket
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from rn50 import launch, schema, tracking
from rn50.environment import git_commit
from rn50.errors import RunFailed, reported

log = logging.getLogger("rn50")


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def run(cfg: DictConfig) -> dict:
    # Report here: an exception leaving the task makes Hydra print more than one line.
    with reported():
        return benchmark(cfg)


def benchmark(cfg: DictConfig) -> dict:
    schema.validate(cfg)
    cfg.dist.accelerator = launch.resolve_accelerator(cfg)
    tracking.check_reachable(cfg.mlflow.tracking_uri)

    hydra_cfg = HydraConfig.get()
    out = Path(hydra_cfg.runtime.output_dir)
    config_file = out / "resolved_config.yaml"
    config_file.write_text(OmegaConf.to_yaml(cfg, resolve=True))
    commit = git_commit()
    tags = {
        "command": " ".join(["python -m rn50", *hydra_cfg.overrides.task]),
        "launch_host": socket.gethostname(),
        "output_dir": str(out),
        "dist": schema.dist_name(cfg),
        **({"git_commit": commit, "mlflow.source.git.commit": commit} if commit else {}),
    }
    name = f"{cfg.model.arch.value}-{cfg.precision.name.value}-{tags['dist']}-bs{cfg.data.batch_size}"
    uri = cfg.mlflow.tracking_uri
    run_id = tracking.start_run(cfg, name, tags)
    tracking.log_results(uri, run_id, {}, artifacts=[str(config_file)])

    try:
        launch.run_local(cfg.dist.gpus_per_node, [str(config_file), "--run-id", run_id, "--out", str(out)])
    except RunFailed as exc:
        tracking.end_run(uri, run_id, ok=False, tags={"failure": exc.kind, "error": str(exc)[:500]})
        raise
    except BaseException:
        tracking.end_run(uri, run_id, ok=False, killed=True)
        raise
    tracking.end_run(uri, run_id, ok=True)

    summary = json.loads((out / "summary.json").read_text())
    log.info(
        "%s: %.1f images/sec (%.1f per device), step %.2f ms median; MLflow run %s",
        name, summary["throughput/images_per_sec"], summary["throughput/images_per_sec_per_device"],
        summary["step_time/median_ms"], run_id,
    )
    return summary


def main() -> None:
    # Let errors reach `reported`, which prints one line, instead of Hydra's multi-line printer.
    os.environ["HYDRA_FULL_ERROR"] = "1"
    with reported():
        run()


if __name__ == "__main__":
    main()
