"""What measuring needs of torch, in a rank and the bare loop: the clock that marks step boundaries
on the device's timeline (rn50/measure/timing.py's WindowTimer reads it), NVML's handle of
torch's CUDA device, the all-reduce timed apart from the steps and the transport it took
(rn50/measure/comm.py), and what a rank ran on (hardware, software versions) as MLflow tags. The
launcher tags the project's commit (rn50/launcher/run.py); the variables a rank's process starts with
are rn50/measure/settings.py's. The launcher, which reads windows but makes none, never imports this
module."""

import os
import time
from importlib import metadata
from typing import Any, Dict, Optional

import torch
import torch.distributed as dist

from rn50.measure import bytecode, comm, nvml
from rn50.measure.settings import CONNECTIONS_ENV


class DeviceClock:
    """Step-boundary marks on a device's timeline; host time where there is no device stream."""

    def __init__(self, device_type: str):
        self.cuda = device_type == "cuda"

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def mark(self) -> Any:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def elapsed_ms(self, start: Any, end: Any) -> float:
        if self.cuda:
            return start.elapsed_time(end)
        return (end - start) * 1e3


def handle_for_cuda_device(index: int):
    """The NVML handle of torch's CUDA device `index`."""
    handles = nvml.library()
    uuid = str(torch.cuda.get_device_properties(index).uuid)
    return handles.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")


def gradient_bytes(module: torch.nn.Module) -> int:
    """The bytes of one set of the module's gradients: what DDP all-reduces every step."""
    return sum(p.numel() * p.element_size() for p in module.parameters() if p.requires_grad)


def allreduce_ms(nbytes: int, device: torch.device, iters: int) -> float:
    """Milliseconds of one all-reduce of nbytes (as float32) over the default process group: the
    mean of `iters` back to back, after as many untimed ones up to nccl-tests' 5, synchronized only
    at the two edges (nccl-tests' way). Every rank of the group calls it together."""
    buffer = torch.ones(max(1, nbytes // 4), dtype=torch.float32, device=device)
    for _ in range(min(5, iters)):
        dist.all_reduce(buffer)
    cuda = device.type == "cuda"
    if cuda:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(device)
    dist.barrier()  # every rank starts together, as nccl-tests' ranks do
    if cuda:
        start.record()
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(buffer)
    if cuda:
        end.record()
        torch.cuda.synchronize(device)
        return start.elapsed_time(end) / iters
    return (time.perf_counter() - t0) * 1e3 / iters


def transport(device_type: str, handle) -> Optional[str]:
    """The transport this process's all-reduces took: NCCL's channels as its log names them
    (rn50/measure/comm.py; P2P as NVLink or PCIe where the NVML handle tells), or off CUDA the
    process group's backend (gloo). Each rank's own: a run joins them (comm.joined)."""
    if device_type != "cuda":
        return dist.get_backend() if dist.is_initialized() else None
    return comm.transports(nvml.has_nvlink(handle) if handle else None)


# What a rank ran on, as MLflow tags.
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
        # where this rank's imports found their bytecode: it sets much of time/startup_ranks_s
        "python_bytecode": bytecode.described(),
    }


def gpu_tags(device_type: str) -> Dict[str, str]:
    if device_type != "cuda":
        return {"gpu_model": "none"}
    return {
        "gpu_model": torch.cuda.get_device_name(),
        "driver_version": nvml.driver_version() or "unknown",
        "cuda_device_max_connections": os.environ.get(CONNECTIONS_ENV, "8"),  # CUDA's default
    }
