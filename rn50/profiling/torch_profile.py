"""profiler=pytorch: torch.profiler over a few steps after the measured windows, and its analysis.

The profiled steps come after the last measured window, so the throughput figure is
never taken under the profiler. The device is synchronized right before the recorded
steps and right after them, so the window holds exactly the work of those steps.

From the recorded events:
- device busy share: the union of the intervals in which any device work ran (kernels,
  memcpy, memset; overlapping streams count once) over the window's wall time. On a CPU
  run the "device work" is the outermost operators of each step (aten ops, autograd
  nodes, optimizer steps), so the share says how much of the step the host spent in them.
- the split of summed device time between kernel kinds (conv/GEMM, batch norm,
  elementwise, optimizer, communication, other), by the kernel's or operator's name.
"""

import csv
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Sequence, Tuple

import pytorch_lightning as pl
import torch
import torch.profiler
from pytorch_lightning.profilers import SimpleProfiler
from torch.autograd import DeviceType
from torch.profiler import ProfilerAction

# First match wins, so the specific kinds come before the broad ones: an optimizer's
# foreach kernel is elementwise too, and a cuDNN batch-norm kernel is not a convolution.
# Names are CUDA kernel names (cuDNN, cuBLAS, CUTLASS, NCCL, ATen) or, on a CPU run,
# operator and autograd node names (aten::convolution, ConvolutionBackward0, ...).
CATEGORIES: List[Tuple[str, re.Pattern]] = [
    ("communication", re.compile(r"nccl|gloo|all_?reduce|all_?gather|reduce_?scatter", re.I)),
    ("optimizer", re.compile(r"multi_tensor_apply|fused_?sgd|_foreach|optimizer\.|amp_update_scale|"
                             r"non_finite_check", re.I)),
    ("batchnorm", re.compile(r"batch_?norm|bn_fw|bn_bw|welford", re.I)),
    ("conv_gemm", re.compile(r"conv(?!ert)|gemm|gemv|xmma|cutlass|cublas|cudnn|nvjet|implicit|wgrad|dgrad|"
                             r"fprop|winograd|addmm|aten::b?mm\b|aten::matmul|aten::linear", re.I)),
    ("elementwise", re.compile(r"elementwise|vectorized|unrolled|reduce_kernel|aten::(add|mul|relu|threshold|"
                               r"copy|fill|clamp|div|sub|zero)|(Add|Mul|Relu|Threshold)Backward", re.I)),
]
OTHER = "other"
KINDS = [name for name, _ in CATEGORIES] + [OTHER]
# Kineto's activity types of device work; its gpu_user_annotation copies of record_function
# ranges are device events too, but not work.
DEVICE_WORK = {"kernel", "gpu_memcpy", "gpu_memset"}
STEP_ANNOTATION = "ProfilerStep"  # torch.profiler's range around each step


@dataclass
class Span:
    name: str
    start_us: float
    end_us: float


def classify(name: str) -> str:
    for kind, pattern in CATEGORIES:
        if pattern.search(name):
            return kind
    return OTHER


def union_us(spans: Iterable[Span], lo: float, hi: float) -> float:
    """Length of the union of the spans, clipped to [lo, hi]."""
    total, reach = 0.0, lo
    for s in sorted(spans, key=lambda s: s.start_us):
        start, end = max(s.start_us, reach), min(s.end_us, hi)
        if end > start:
            total += end - start
            reach = end
    return total


def _is_step(event) -> bool:
    return event.name.startswith(STEP_ANNOTATION)


def _span(event) -> Span:
    return Span(event.name, event.time_range.start, event.time_range.end)


def step_window(events) -> Tuple[float, float]:
    """From the start of the first recorded step to the end of the last, on the host."""
    steps = [e for e in events if _is_step(e) and e.device_type == DeviceType.CPU]
    if not steps:
        raise RuntimeError("torch.profiler recorded no ProfilerStep ranges")
    return min(e.time_range.start for e in steps), max(e.time_range.end for e in steps)


def device_work(events) -> List[Span]:
    """Kernels, copies and memsets that ran on a GPU."""
    # torch before 2.12 has no activity_type on its events; there the device copies of
    # record_function ranges (gpu_user_annotation) are known by their host range's name.
    annotations = {e.name for e in events if e.device_type == DeviceType.CPU and e.is_user_annotation}
    return [_span(e) for e in events
            if e.device_type != DeviceType.CPU and e.name not in annotations
            and getattr(e, "activity_type", "kernel") in DEVICE_WORK]


def _wrapper(event) -> bool:
    """Ranges that only wrap work: the step ranges, annotations of no kind (DDP's forward), and an
    optimizer step with other work inside: Lightning runs forward and backward in the step's
    closure unless the precision plugin calls it first (amp's does; fp32's, bf16's do not)."""
    if _is_step(event):
        return True
    if not event.is_user_annotation:
        return False
    kind = classify(event.name)
    children = getattr(event, "cpu_children", ())
    return kind == OTHER or (kind == "optimizer" and any(classify(c.name) != "optimizer" for c in children))


def _outermost(event) -> bool:
    parent = event.cpu_parent
    while parent is not None:
        if not _wrapper(parent):
            return False
        parent = parent.cpu_parent
    return True


def host_work(events) -> List[Span]:
    """A CPU run's work: the outermost operators and annotated steps of a kind (Optimizer.step)."""
    return [_span(e) for e in events
            if e.device_type == DeviceType.CPU and not e.is_async and not _wrapper(e) and _outermost(e)]


def kernel_table(work: Sequence[Span]) -> List[Dict]:
    """One row per name, most time first: category, calls, total_ms, time_pct, name."""
    calls, total = defaultdict(int), defaultdict(float)
    for s in work:
        calls[s.name] += 1
        total[s.name] += s.end_us - s.start_us
    whole = sum(total.values()) or 1.0
    rows = [{"category": classify(name), "calls": calls[name], "total_ms": us / 1e3,
             "time_pct": 100.0 * us / whole, "name": name} for name, us in total.items()]
    return sorted(rows, key=lambda r: -r["total_ms"])


def profile_metrics(work: Sequence[Span], window: Tuple[float, float], steps: int) -> Dict[str, float]:
    """profile/device_busy_pct, profile/window_ms, profile/<kind>_pct for every kind, and the
    communication of one step: comm_ms_per_step (the union of the collectives' kernels) and
    comm_exposed_ms_per_step, the part of it during which no other kernel ran. On a rank of
    several that is the all-reduce nothing hid, waits for slower peers included."""
    lo, hi = window
    busy = union_us(work, lo, hi)
    comm = [s for s in work if classify(s.name) == "communication"]
    compute = [s for s in work if classify(s.name) != "communication"]
    metrics = {"profile/device_busy_pct": 100.0 * busy / (hi - lo),
               "profile/window_ms": (hi - lo) / 1e3,
               "profile/comm_ms_per_step": union_us(comm, lo, hi) / 1e3 / steps,
               "profile/comm_exposed_ms_per_step": (busy - union_us(compute, lo, hi)) / 1e3 / steps}
    by_kind = defaultdict(float)
    for row in kernel_table(work):
        by_kind[row["category"]] += row["time_pct"]
    metrics.update({f"profile/{kind}_pct": by_kind[kind] for kind in KINDS})
    return metrics


def write_table(path: Path, rows: List[Dict]) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["category", "calls", "total_ms", "time_pct", "name"])
        writer.writeheader()
        writer.writerows(rows)


class TorchProfile(pl.Callback):
    """Profiles wait+warmup+active steps from `first_step` on rank 0; then holds metrics and files.

    Only rank 0 profiles: the profiler issues no collectives, so the ranks stay in step,
    and the other ranks' copies of the same work would be parsed only to be thrown away.
    """

    def __init__(self, profiler_cfg, first_step: int, device_type: str, out: Path):
        self.schedule = torch.profiler.schedule(
            wait=profiler_cfg.wait, warmup=profiler_cfg.warmup, active=profiler_cfg.active, repeat=1)
        self.total = profiler_cfg.wait + profiler_cfg.warmup + profiler_cfg.active
        self.active = profiler_cfg.active
        self.first_step, self.cuda, self.out = first_step, device_type == "cuda", out
        self._step = 0
        self._prof = None
        self._metrics: Dict[str, float] = {}
        self._files: List[Path] = []

    def metrics(self) -> Dict[str, float]:
        return self._metrics

    def artifacts(self) -> List[str]:
        return [str(f) for f in self._files]

    def _recording(self, step: int) -> bool:
        return step >= 0 and self.schedule(step) in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)

    def _sync_at_edge(self, step: int) -> None:
        """Before `step` starts: synchronize if recording starts or stops there, so the window is exact."""
        if self.cuda and self._recording(step - 1) != self._recording(step):
            torch.cuda.synchronize()

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if self._step != self.first_step or not trainer.is_global_zero:
            return
        activities = [torch.profiler.ProfilerActivity.CPU]
        if self.cuda:
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        self._prof = torch.profiler.profile(activities=activities, schedule=self.schedule)
        self._sync_at_edge(0)
        self._prof.start()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self._step += 1
        if self._prof is None:
            return
        self._sync_at_edge(self._prof.step_num + 1)
        self._prof.step()
        if self._prof.step_num == self.total:
            self._prof.stop()
            self._analyze(self._prof)
            self._prof = None

    def _analyze(self, prof) -> None:
        events = prof.events()
        work = device_work(events) if self.cuda else host_work(events)
        if not work:
            raise RuntimeError("torch.profiler recorded no device work in the profiled steps")
        trace, table = self.out / "trace.json.gz", self.out / "kernels.csv"
        prof.export_chrome_trace(str(trace))
        write_table(table, kernel_table(work))
        self._metrics = profile_metrics(work, step_window(events), self.active)
        self._files = [trace, table]


def simple(out: Path) -> SimpleProfiler:
    """profiler=simple: Lightning's SimpleProfiler, its time per hook written to out/profiler*.txt."""
    return SimpleProfiler(dirpath=out, filename="profiler")
