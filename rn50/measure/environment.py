"""What a rank ran on (hardware, software versions) as MLflow tags. The launcher tags the project's
commit (rn50/launcher/run.py); the variables a rank's process starts with are rn50/measure/settings.py's."""

import os
from importlib import metadata
from typing import Dict

import torch

from rn50.measure import nvml
from rn50.measure.settings import CONNECTIONS_ENV

def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def software_tags() -> Dict[str, str]:
    return {
        # str(): torch's TorchVersion would make the launcher, which unpickles a rank's result,
        # import torch (seconds, and a rule of its layers) to read one tag.
        "torch_version": str(torch.__version__),
        "torchvision_version": _version("torchvision"),
        "lightning_version": _version("pytorch-lightning"),
        "cuda_version": str(torch.version.cuda),
        "cudnn_version": str(torch.backends.cudnn.version()),
    }


def gpu_tags(device_type: str) -> Dict[str, str]:
    if device_type != "cuda":
        return {"gpu_model": "none"}
    return {
        "gpu_model": torch.cuda.get_device_name(),
        "driver_version": nvml.driver_version() or "unknown",
        "cuda_device_max_connections": os.environ.get(CONNECTIONS_ENV, "8"),  # CUDA's default
    }
