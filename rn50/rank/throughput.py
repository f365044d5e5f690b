"""The Lightning callback that times the measured windows, samples the GPU during them, and keeps
what proves the run trained: each step's loss and the steps its loss scaler skipped (rn50/measure/trained.py)."""

import gc
import os
import socket
import time
from typing import Dict, List, Optional

import pytorch_lightning as pl
import torch

from rn50.measure.settings import Collections
from rn50.measure import host, nvml
from rn50.measure.device import DeviceClock, allreduce_ms, gradient_bytes, handle_for_cuda_device, transport
from rn50.measure.timing import WindowTimer
from rn50.recipe.precision import read_scaler
from rn50.wire import RankResult


class ThroughputCallback(pl.Callback):
    """Marks each step's ends; after training, rank 0's `ranks` holds every rank's RankResult."""

    def __init__(self, bench_cfg, telemetry_cfg, device_type: str, batch_size: int):
        self.timer = WindowTimer(
            bench_cfg.warmup_steps, bench_cfg.steps, bench_cfg.repeats, DeviceClock(device_type), on_edge=self._at_edge
        )
        self.device_type, self.batch_size = device_type, batch_size
        self.interval_s = telemetry_cfg.interval_s
        self.comm_iters = bench_cfg.comm_iters
        self.sampler = None
        self._handle = None  # NVML's, of this rank's GPU
        self.first_step_at = 0.0
        # the stages of the rank's start it reached, and when (RankResult.started)
        self.started: Dict[str, Optional[float]] = {}
        self.warmup_s: Optional[float] = None
        self._first_step_perf = 0.0
        self.ranks: Optional[List[RankResult]] = None
        # This process's CPU seconds and wall seconds inside the measured windows.
        self._cpu_s = self._wall_s = 0.0
        # Each step's loss as the device tensor Lightning already cloned for this hook: keeping
        # it costs no kernel and no sync; all are read once, after the last step.
        self._losses: List[torch.Tensor] = []
        self.collections = Collections()  # the garbage collector's passes inside the windows
        # What else ran beside the windows (rn50/measure/host.py): host-wide and own CPU seconds, GPU pids.
        self._host_s = self._own_s = None
        self._gpu_pids: set = set()
        self._allreduce_before_ms: Optional[float] = None  # timed before the data loaders start

    def setup(self, trainer, pl_module, stage):
        self.started["setup"] = time.time()  # Lightning's process group is up; DDP's wrap comes next
        gc.callbacks.append(self.collections)
        if self.device_type == "cuda":
            handle = self._handle = handle_for_cuda_device(trainer.strategy.root_device.index)
            self.sampler = nvml.Sampler(lambda: nvml.read(handle), self.interval_s,
                                        energy_counter=lambda: nvml.energy_mj(handle))

    def on_fit_start(self, trainer, pl_module):
        # The network as the run found it, to set beside the figure timed after the windows: once DDP is
        # built, before the first step and its compile, and before Lightning starts the data loaders
        # (on_train_start comes after), whose start would load the host as the after-probe's does not.
        self.started["ddp"] = time.time()
        self._allreduce_before_ms = self._allreduce_ms(trainer, pl_module)
        self.started["probe"] = time.time()

    def on_train_start(self, trainer, pl_module):
        self.started["data"] = time.time()  # the loaders are built; their first batch comes with the first step

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if not self.first_step_at:
            self.first_step_at, self._first_step_perf = time.time(), time.perf_counter()
        self.timer.step_start()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self._losses.append(outputs["loss"] if isinstance(outputs, dict) else outputs)
        was_measuring = self.timer.measuring
        self.timer.step_end()
        if was_measuring == self.timer.measuring:
            return
        if self.warmup_s is None:  # the first window starts: the warm-up is over
            self.warmup_s = time.perf_counter() - self._first_step_perf
        sign = 1 if was_measuring else -1  # a window ends: add its time; one starts: subtract
        self._cpu_s += sign * time.process_time()
        self._wall_s += sign * time.perf_counter()
        self.collections.counting = self.timer.measuring
        if self.sampler is None:
            return
        if self.timer.measuring:
            self.sampler.start()
        else:
            self.sampler.stop()

    def _at_edge(self, k: int) -> None:
        """The timer's edge k, where its work is in no window (WindowTimer marks the window's start again
        after it): at the first and the last, the host's busy CPU time and this rank's (its processes'
        tree), and the processes on its GPU."""
        if k not in (0, self.timer.repeats):
            return
        sign = -1 if k == 0 else 1  # the first edge is subtracted, the last added: their difference
        now_host, now_own = host.busy_s(), host.tree_cpu_s(os.getpid())
        if now_host is not None and now_own is not None:
            self._host_s = (self._host_s or 0.0) + sign * now_host
            self._own_s = (self._own_s or 0.0) + sign * now_own
        if self._handle is not None:
            self._gpu_pids |= set(nvml.process_pids(self._handle))

    def teardown(self, trainer, pl_module, stage):
        if self.collections in gc.callbacks:
            gc.callbacks.remove(self.collections)

    def on_train_end(self, trainer, pl_module):
        if len(self.timer.windows) < self.timer.repeats:
            raise RuntimeError(
                f"only {len(self.timer.windows)} of {self.timer.repeats} windows were measured"
            )
        mine = RankResult(
            rank=trainer.global_rank,
            node_rank=trainer.node_rank,
            local_rank=trainer.local_rank,
            hostname=socket.gethostname(),
            pid=os.getpid(),
            windows=self.timer.windows,
            batch_size=self.batch_size,
            samples=self.sampler.samples if self.sampler else [],
            energy_j=self.sampler.joules() if self.sampler else None,
            energy_source=self.sampler.energy_source if self.sampler else None,
            process_cpu_pct=100.0 * self._cpu_s / self._wall_s if self._wall_s > 0 else None,
            cpu_cores=host.usable_cores(),
            first_step_at=self.first_step_at,
            started=self.started,
            warmup_s=self.warmup_s or 0.0,
            **self._training_proof(trainer),
            **self._communication(trainer, pl_module),
            gc_collections=self.collections.count,
            gc_ms=self.collections.ms,
            host_busy_s=self._host_s,
            own_cpu_s=self._own_s,
            windows_wall_s=self._wall_s,
            gpu_pids=sorted(self._gpu_pids),
        )
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            gathered = [None] * torch.distributed.get_world_size()
            torch.distributed.all_gather_object(gathered, mine)
        else:
            gathered = [mine]
        self.ranks = gathered if trainer.is_global_zero else None

    def _allreduce_ms(self, trainer, pl_module) -> Optional[float]:
        """A rank of several: its gradients' all-reduce timed alone (rn50/measure/comm.py); None for one
        rank, or bench.comm_iters=0."""
        if trainer.world_size < 2 or self.comm_iters < 1:
            return None
        return allreduce_ms(gradient_bytes(pl_module), trainer.strategy.root_device, self.comm_iters)

    def _communication(self, trainer, pl_module) -> dict:
        """The all-reduce timed again after the last step, and so outside every window, beside the one
        before the first step, and the transport NCCL chose for it."""
        ms = self._allreduce_ms(trainer, pl_module)
        if ms is None:
            return {}
        return dict(allreduce_ms=ms, allreduce_before_ms=self._allreduce_before_ms,
                    allreduce_bytes=gradient_bytes(pl_module), transport=transport(self.device_type, self._handle))

    def _training_proof(self, trainer) -> dict:
        """Every step's loss, the scaler's skipped steps and its final scale, read now that the
        device is done (one wait, outside the windows)."""
        losses = torch.stack([loss.detach() for loss in self._losses]).float().tolist()
        self._losses = []
        return dict(losses=losses, **read_scaler(getattr(trainer.precision_plugin, "scaler", None), len(losses)))

