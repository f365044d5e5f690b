"""data.batch_size=auto: find the per-device batch with the highest images/sec that fits in memory.

`find_batch` is the search, free of torch: it calls a probe (batch -> images/sec, or None or an
out-of-memory error when the batch does not fit) and spends at most a budget of training steps.
It doubles the batch from `start` while images/sec improves by more than `min_gain`, going down
instead when `start` does not fit, then probes the midpoints between the best batch and its
probed neighbours (the next smaller one, and the next larger one, which was slower or did not
fit) until the budget is spent or no new batch lies between. Batches are multiples of `multiple`
(8 on GPUs) where they can be. The answer is the fastest batch probed.

`make_probe` builds rn50's step (rn50/recipe/train_step.py, as the bare loop trains: the same network,
precision, channels_last and fused SGD) on the rank's device and times a few steps of a
synthetic batch in one window of rn50/measure/timing.py's WindowTimer: synchronized only at its edges.

`search_batch` is what a rank calls before it builds its trainer: it searches and (with several ranks
and a process group) takes rank 0's choice on every rank; the rank hands the batch on in a copy of its
config (rn50/config/reads.py's decided), and writes none. A compiled model compiles once for the whole search, with the batch
dimension dynamic; the run then compiles for the chosen batch alone.
"""

import csv
import gc
import logging
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Union

import torch
import torch.distributed as dist

from rn50.config.compilation import CAPTURING_MODES, compile_mode
from rn50.config.reads import is_auto, world_size
from rn50.console import terminal
from rn50.errors import Rn50Error, failure_kind
from rn50.measure.device import DeviceClock
from rn50.measure.meter import Meter
from rn50.measure.timing import WindowTimer, window_images_per_sec
from rn50.options.components import Options
from rn50.recipe.model import configure_compile
from rn50.recipe.train_step import build_train_step

log = logging.getLogger("rn50")

OOM = None
"""What a probe returns for a batch that does not fit (it may also raise the allocator's error)."""


@dataclass
class Limits:
    """How far and how long a search goes."""

    start: int
    max_batch: int
    multiple: int
    warmup_steps: int
    """Untimed steps of each probe: cuDNN autotunes a new shape, compile and CUDA graphs record."""
    steps: int
    """Timed steps of each probe."""
    step_budget: int
    """All steps of all probes, warm-up included."""

    @property
    def steps_per_probe(self) -> int:
        return self.warmup_steps + self.steps


# GPUs: 64 -> 128 -> ... -> 2048 at most, ~8 probes of 3 + 10 steps.
GPU_LIMITS = Limits(start=64, max_batch=2048, multiple=8, warmup_steps=3, steps=10, step_budget=104)
# CPUs: small batches and few steps (2, 4, 8, 16, 32: 5 probes of 1 + 2 steps), so a CPU run
# with a tiny model searches in seconds; CPU throughput hardly changes with batch anyway.
CPU_LIMITS = Limits(start=2, max_batch=32, multiple=2, warmup_steps=1, steps=2, step_budget=15)


@dataclass
class Probe:
    batch: int
    images_per_sec: Optional[float]
    """None when the batch did not fit in memory."""
    steps: int
    """Steps this probe was charged against the budget."""


@dataclass
class SearchResult:
    batch: int
    probes: List[Probe] = field(default_factory=list)
    steps: int = 0
    """Steps spent, warm-up included; never more than the budget."""
    seconds: float = 0.0


class NoBatchFits(Rn50Error):
    """Even the smallest batch ran out of memory."""


def is_oom(exc: BaseException) -> bool:
    """CUDA's OutOfMemoryError, MemoryError, or the CPU allocator's RuntimeError."""
    if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError":
        return True
    return isinstance(exc, RuntimeError) and failure_kind(str(exc)) == "oom"


def snap(batch: float, multiple: int) -> int:
    """The nearest multiple of `multiple`, or the batch itself (at least 1) below it."""
    if batch < multiple:
        return max(1, int(batch))
    return max(multiple, int(round(batch / multiple)) * multiple)


def find_batch(probe: Callable[[int], Optional[float]], start: int = 64, max_batch: int = 2048,
               step_budget: int = 104, steps_per_probe: int = 13, multiple: int = 8,
               min_gain: float = 0.01) -> SearchResult:
    """The batch with the highest images/sec among those probed; see the module's docstring.

    Every probe is charged `steps_per_probe` steps, out-of-memory ones too, and no probe starts
    that would take the total past `step_budget`. Raises NoBatchFits when batch 1 does not fit,
    or when the budget ran out before any batch fitted.
    """
    if step_budget < steps_per_probe:
        raise ValueError(f"a step budget of {step_budget} is less than one probe ({steps_per_probe} steps)")
    result = SearchResult(batch=0)
    rates: Dict[int, Optional[float]] = {}
    t0 = time.perf_counter()

    def affordable() -> bool:
        return result.steps + steps_per_probe <= step_budget

    def run(batch: int) -> Optional[float]:
        if batch not in rates:
            result.steps += steps_per_probe
            try:
                rate = probe(batch)
            except Exception as exc:
                if not is_oom(exc):
                    raise
                rate = OOM
            rates[batch] = rate
            result.probes.append(Probe(batch, rate, steps_per_probe))
            log.info("batch search: batch %d: %s", batch, "out of memory" if rate is None else f"{rate:.1f} images/sec")
        return rates[batch]

    # A batch that fits: start, or halve until one does.
    batch = snap(min(start, max_batch), multiple)
    while run(batch) is OOM:
        if batch == 1:
            raise NoBatchFits("data.batch_size=auto: not even a batch of 1 fits in memory")
        if not affordable():
            raise NoBatchFits(f"data.batch_size=auto: no batch down to {batch} fitted in memory "
                              f"within the search's {step_budget} steps; give a fixed data.batch_size")
        batch = snap(batch / 2, multiple)
    best = batch
    # Double while it pays.
    while best < max_batch and affordable():
        bigger = min(snap(best * 2, multiple), max_batch)
        rate = run(bigger)
        if rate is OOM or rate <= rates[best] * (1 + min_gain):
            break
        best = bigger
    # Refine between the best and its probed neighbours.
    while affordable():
        fitted = {b: r for b, r in rates.items() if r is not OOM}
        best = max(fitted, key=fitted.get)
        neighbours = [min((b for b in rates if b > best), default=None),
                      max((b for b in rates if b < best), default=None)]
        between = [snap((best + n) / 2, multiple) for n in neighbours if n is not None]
        fresh = [b for b in between if b not in rates and b != best]
        if not fresh:
            break
        for b in fresh:
            if affordable():
                run(b)
    fitted = {b: r for b, r in rates.items() if r is not OOM}
    result.batch = max(fitted, key=fitted.get)
    result.seconds = time.perf_counter() - t0
    return result


def limits_for(device_type: str) -> Limits:
    return GPU_LIMITS if device_type == "cuda" else CPU_LIMITS


def make_probe(cfg, device, limits: Limits, precision) -> Callable[[int], Optional[float]]:
    """rn50's training step on `device`, timed on a synthetic batch of the probed size.

    The probe keeps one network and optimizer across batches, as a run keeps them, and frees
    each batch's memory after its probe; it returns OOM (and frees what it can) when the batch
    does not fit. `probe.close()` frees the network and the compiled graphs. precision: the
    run's option (rn50/options/precision.py), whose autocast and scaler the step takes.
    """
    mode = compile_mode(cfg.model)
    configure_compile(cfg.model.autotune_pointwise, cfg.model.autotune_coordinate_descent, cfg.model.compile_ddp.value)
    torch.backends.cudnn.benchmark = cfg.model.cudnn_benchmark  # as the Trainer's benchmark=
    train = build_train_step(cfg.model.arch.value, precision, device,
                             num_classes=cfg.model.num_classes, image_size=cfg.data.image_size,
                             channels_last=cfg.model.channels_last, compile_mode=mode, optim=cfg.optim)

    def free() -> None:
        if device.type == "cuda":  # hand the batch's blocks back, so the next size starts unfragmented
            gc.collect()
            torch.cuda.empty_cache()

    def probe(batch: int) -> Optional[float]:
        try:
            images, labels = train.batch(batch, seed=cfg.seed)
            if mode is not None:  # one compile for every probed batch, not one each
                torch._dynamo.maybe_mark_dynamic(images, 0)
                torch._dynamo.maybe_mark_dynamic(labels, 0)
            timer = WindowTimer(limits.warmup_steps, limits.steps, 1, DeviceClock(device.type))
            for _ in range(timer.total_steps):
                train(images, labels)
                timer.step_end()
            return window_images_per_sec(timer.windows, batch, 1)[0]
        except Exception as exc:
            if not is_oom(exc):
                raise
            trees = sys.modules.get("torch._inductor.cudagraph_trees")  # loaded by the compiled step's recording
            if mode in CAPTURING_MODES and trees is not None:  # a recording cut short: record afresh, keep the code
                trees.reset_cudagraph_trees()
            return OOM
        finally:
            images = labels = None
            train.optimizer.zero_grad(set_to_none=True)
            free()

    def close() -> None:
        nonlocal train
        train = None
        if mode is not None:
            torch._dynamo.reset()  # drops the dynamic-batch graphs and their CUDA graph pools
        free()

    probe.close = close
    return probe


def search_batch(cfg, device_type: str, options: Options, limits: Optional[Limits] = None) -> Optional[SearchResult]:
    """For data.batch_size=auto: search on this rank's device for the batch to run (result.batch, which the
    caller hands on in the run's config: reads.decided). None for a fixed batch.

    With several ranks every rank searches on its own device at once, then all take rank 0's
    batch: this joins the ranks' process group first (join_ranks), which Lightning then uses.
    """
    if not is_auto(cfg):
        return None
    device = local_device(device_type)
    if world_size(cfg) > 1:
        join_ranks(cfg, device, options)
    limits = limits or limits_for(device.type)
    probe = make_probe(cfg, device, limits, options.precision)
    # Rank 0 shows the search's steps (with a heartbeat, as a run's phases do): a compiled search
    # or a CPU one takes minutes before the run's first step.
    zero = not torch.distributed.is_initialized() or torch.distributed.get_rank() == 0
    meter = Meter("rn50: batch search", limits.step_budget, stream=terminal(), heartbeat=True) if zero else None

    def shown(batch: int) -> Optional[float]:
        try:
            return probe(batch)
        finally:
            if meter is not None:
                meter.update(meter.done + limits.steps_per_probe)

    try:
        result = find_batch(shown, limits.start, limits.max_batch, limits.step_budget,
                            limits.steps_per_probe, limits.multiple)
        if meter is not None:
            meter.total = meter.done  # the budget was the most it could take
            meter.finish(f"batch {result.batch}")
    finally:
        probe.close()
        if meter is not None:
            meter.stop()
    result.batch = agree_on_batch(result.batch)
    log.info("batch search: chose batch %d per device after %d probes (%d steps, %.1f s)",
             result.batch, len(result.probes), result.steps, result.seconds)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    return result


def local_device(device_type: str):
    """The device this rank trains on, which rn50/rank/run.py made current as Lightning will pick it."""
    if device_type != "cuda":
        return torch.device("cpu")
    return torch.device("cuda", torch.cuda.current_device())


def join_ranks(cfg, device, options: Options) -> None:
    """Initialize the default process group as Lightning's DDP strategy would (the same cluster
    environment, backend and timeout), so the ranks can agree before the Trainer exists.
    Lightning finds the group initialized and uses it."""
    if dist.is_initialized():
        return
    cuda = device.type == "cuda"
    backend, device_id = ("nccl", device) if cuda else ("gloo", None)
    options.cluster.join(backend, device_id)


def agree_on_batch(batch: int) -> int:
    """Rank 0's batch on every rank when a process group is up; this rank's batch otherwise."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return batch
    chosen = [batch]
    dist.broadcast_object_list(chosen, src=0)
    return int(chosen[0])


def search_metrics(result: SearchResult) -> Dict[str, float]:
    """data.batch_size_chosen, batch_search/probe_bs{N}_images_per_sec for each batch that fit,
    and the search's cost: batch_search/probes, batch_search/steps, batch_search/seconds."""
    metrics: Dict[str, float] = {"data.batch_size_chosen": result.batch,
                                 "batch_search/probes": len(result.probes),
                                 "batch_search/steps": result.steps,
                                 "batch_search/seconds": result.seconds}
    for p in result.probes:
        if p.images_per_sec is not None:
            metrics[f"batch_search/probe_bs{p.batch}_images_per_sec"] = p.images_per_sec
    return metrics


def write_csv(path, result: SearchResult) -> str:
    """batch_search.csv: one row per probe in the order they ran; oom is 1 for a batch that did not fit."""
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(("probe", "batch", "images_per_sec", "oom", "steps", "chosen"))
        for i, p in enumerate(result.probes):
            rate: Union[str, float] = "" if p.images_per_sec is None else round(p.images_per_sec, 2)
            out.writerow((i, p.batch, rate, int(p.images_per_sec is None), p.steps, int(p.batch == result.batch)))
    return str(path)
