"""What measuring needs of torch, in a rank and the bare loop: the clock that marks step boundaries
on the device's timeline (rn50/measure/timing.py's WindowTimer reads it), and NVML's handle of
torch's CUDA device. The launcher, which reads windows but makes none, never imports this module."""

import time
from typing import Any

import torch

from rn50.measure import nvml


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
