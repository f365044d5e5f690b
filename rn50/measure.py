"""The Lightning callback that times the windows and samples the GPU during them."""

import csv
import socket
import time
from typing import Any, Dict, List

import pytorch_lightning as pl
import torch

from rn50 import nvml
from rn50.timing import DeviceClock, WindowTimer


class Benchmark(pl.Callback):
    """Marks each step end; after training every rank holds every rank's windows and samples."""

    def __init__(self, bench_cfg, telemetry_cfg, device_type: str):
        self.timer = WindowTimer(
            bench_cfg.warmup_steps, bench_cfg.steps, bench_cfg.repeats, DeviceClock(device_type)
        )
        self.device_type = device_type
        self.interval_s = telemetry_cfg.interval_s
        self.sampler = None
        self.ranks: List[Dict[str, Any]] = []
        # This process's CPU seconds and wall seconds inside the measured windows.
        self._cpu_s = self._wall_s = 0.0

    def setup(self, trainer, pl_module, stage):
        if self.device_type == "cuda":
            handle = nvml.handle_for_cuda_device(trainer.strategy.root_device.index)
            self.sampler = nvml.Sampler(lambda: nvml.read(handle), self.interval_s)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.timer.step_start()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        was_measuring = self.timer.measuring
        self.timer.step_end()
        if was_measuring == self.timer.measuring:
            return
        sign = 1 if was_measuring else -1  # a window ends: add its time; one starts: subtract
        self._cpu_s += sign * time.process_time()
        self._wall_s += sign * time.perf_counter()
        if self.sampler is None:
            return
        if self.timer.measuring:
            self.sampler.start()
        else:
            self.sampler.stop()

    def on_train_end(self, trainer, pl_module):
        if len(self.timer.windows) < self.timer.repeats:
            raise RuntimeError(
                f"only {len(self.timer.windows)} of {self.timer.repeats} windows were measured"
            )
        mine = {
            "windows": self.timer.windows,
            "samples": self.sampler.samples if self.sampler else [],
            "hostname": socket.gethostname(),
            "node_rank": trainer.node_rank,
            "local_rank": trainer.local_rank,
            "process_cpu_pct": 100.0 * self._cpu_s / self._wall_s if self._wall_s > 0 else None,
        }
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            self.ranks = [None] * torch.distributed.get_world_size()
            torch.distributed.all_gather_object(self.ranks, mine)
        else:
            self.ranks = [mine]


RANK_COLUMNS = ("rank", "node_rank", "local_rank", "hostname", "process_cpu_pct")


def write_ranks_csv(path, ranks: List[Dict[str, Any]]) -> None:
    """Where each rank ran and how busy its process kept the host's CPU in the measured windows."""
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(RANK_COLUMNS)
        for rank, entry in enumerate(ranks):
            cpu = entry["process_cpu_pct"]
            writer.writerow([rank, *(entry[k] for k in RANK_COLUMNS[1:4]), "" if cpu is None else f"{cpu:.1f}"])
