"""What a run ran on: hardware, software versions and the project's commit, as MLflow tags."""

import subprocess
from importlib import metadata
from pathlib import Path
from typing import Dict, Optional

from rn50 import nvml

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def git_commit() -> Optional[str]:
    try:
        out = subprocess.run(
            ["git", "-C", str(PROJECT_ROOT), "rev-parse", "HEAD"],
            capture_output=True, text=True, timeout=10, check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def software_tags() -> Dict[str, str]:
    import torch

    return {
        "torch_version": torch.__version__,
        "torchvision_version": _version("torchvision"),
        "lightning_version": _version("pytorch-lightning"),
        "cuda_version": str(torch.version.cuda),
        "cudnn_version": str(torch.backends.cudnn.version()),
    }


def gpu_tags(device_type: str) -> Dict[str, str]:
    if device_type != "cuda":
        return {"gpu_model": "none"}
    import torch

    return {
        "gpu_model": torch.cuda.get_device_name(),
        "driver_version": nvml.driver_version() or "unknown",
    }
