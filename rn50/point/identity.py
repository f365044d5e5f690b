"""What a point of a sweep is: the hash that finds it again (sweep.resume) and the keys that count
for its figures, read the same for runs logged by older versions of rn50 (compare, report and
resume match those to new ones)."""

import functools
import hashlib
import json
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf

from rn50.config.dali_schema import DaliConfig
from rn50.config.schema import OptimName, TrainName
from rn50.config.reads import DEFAULT_CLASSES, world_size
from rn50.options.pipelines import Dali, Pipeline

# The class paths the built-in options had before rn50's modules moved into packages (issue 28).
# Runs logged them as params (data._target_, ...) and run.json keeps them for train.resume: read
# through current_target, those runs match the same options' runs of today.
MOVED_TARGETS = {
    **{f"rn50.pipelines.{c}": f"rn50.options.pipelines.{c}" for c in ("Synthetic", "ImageFolder", "Dali")},
    **{f"rn50.precision.{c}": f"rn50.options.precision.{c}" for c in ("Fp32", "Tf32", "Amp", "AmpStatic", "Bf16")},
    **{f"rn50.profilers.{c}": f"rn50.options.profilers.{c}" for c in ("NoProfiler", "Simple", "PyTorch", "Ncu")},
    **{f"rn50.clusters.{c}": f"rn50.options.clusters.{c}" for c in ("Local", "Torchrun", "Slurm")},
}


def current_target(target: str) -> str:
    """A _target_ as it is named today: a built-in option's path from before issue 28, moved."""
    return MOVED_TARGETS.get(target, target)


def current_params(params: Dict[str, str]) -> Dict[str, str]:
    """A run's params with each <group>._target_ as current_target names it."""
    return {k: current_target(v) if k.endswith("._target_") else v for k, v in params.items()}


# The keys that count for a point, in one place: why a key may leave a point's figure as it is,
# and which of those reasons each comparison of runs accepts. A name ending in a dot is a group
# of keys, another name a key. `leaves_out` reads them.
RECORDED = ("mlflow.",)
"""Where a run is recorded."""
LAUNCHED = ("sweep.", "dry_run")
"""How a run is started."""
PROFILE = ("device",)
"""The settings' profile: it changes a run only through the keys it sets, which count themselves."""
WATCHED = ("telemetry.",)
"""What is sampled beside the figure."""
DERIVED = ("mfu.",)
"""What is computed from the figure afterwards: MFU and its peaks."""
PLACED = ("cluster.",)
"""Where the scheduler puts a run."""
PROFILER_OWN = ("profiler.active", "profiler.wait", "profiler.warmup", "profiler.steps", "profiler.executable")
"""The profiler's own settings: its steps come after the measured windows."""

NOT_MEASURED = RECORDED + LAUNCHED + PROFILE
"""A point's identity (config_hash, sweep.resume): everything counts but where it is recorded and
how it is started."""
NOT_IMAGES_PER_SEC = RECORDED + ("dry_run",) + PROFILE + WATCHED + DERIVED + PLACED + PROFILER_OWN + (
    "bench.repeats", "bench.comm_iters", "dist.accelerator")
"""Runs of one point for rn50.compare: also the number of windows (more measure the same figure), the
all-reduces timed after them
and dist.accelerator, which compare replaces by the device kind the run used (so `auto` on a GPU
host matches `gpu`)."""
NOT_REPORT_SETUP = ("dist.", "profiler.", "model.compile_ddp") + WATCHED + PLACED + RECORDED + PROFILE
"""A report's setup (the rows a scaling table compares): the same setup on any number of
devices, under any profiler, and however compile meets DDP (one device has no DDP, so its point is the
reference of either); MFU's peak table is left out apart (rn50/results/rows.py's PEAK_TABLE)."""
MAY_DIFFER_ON_RESUME = ("train.resume",) + RECORDED + LAUNCHED + PLACED + WATCHED + (
    "profiler.", "data.num_workers", "data.root", "data.dali.num_threads", "dist.interface")
"""Between a run and its resumption (rn50/results/resume.py): also how it is read and connected, and
resume itself; anything else changes what the checkpoint would continue."""


def leaves_out(key: str, reasons: Tuple[str, ...]) -> bool:
    """Whether the dotted key falls under one of `reasons` (a group ending in a dot, or a key)."""
    return key.startswith(reasons)


# Keys that every option of a group had before some moved into an option's own schema, with the
# value the others had: a hash counts them as before.
MOVED_KEYS = {"precision.loss_scale": None, "profiler.wait": 1, "profiler.warmup": 2, "profiler.active": 5,
              "profiler.steps": 1, "profiler.executable": "ncu", "profiler.metrics": {},
              "cluster.partition": None, "cluster.account": None, "cluster.qos": None, "cluster.timeout_min": 60,
              "cluster.cpus_per_task": None, "cluster.sbatch": {}, "cluster.rdzv_endpoint": "HEAD_NODE:29500"}
# Keys added after runs were recorded, with the value that behaves as before they existed.
LATER_KEYS = {
    "model.autotune_pointwise": False, "model.autotune_coordinate_descent": False,
    "data.dali.cpu_decode_share": 0.0, "data.dali.hybrid_huffman_threshold": 1_000_000,
    "data.dali.affine": True, "data.dali.cpu_prefetch_queue_depth": None,
    "data.dali.stream_policy": "default", "data.dali.concurrency": "default",
    "data.dali.training_stream": "default", "dist.interface": None, "bench.comm_iters": 20,
    "data.dali.cache_size_mb": 0, "model.compile_ddp": "ddp_optimizer", "dist.broadcast_buffers": True,
    "model.cudnn_benchmark": True,
}


@functools.lru_cache(maxsize=None)
def _pipeline_class(target: str) -> Optional[type]:
    """The class a data._target_ names; None where it does not import (the checks say so in one
    line, after the hash)."""
    try:
        return get_class(current_target(target))
    except Exception:
        return None


def _has_training_stream(cfg: DictConfig) -> bool:
    """Whether data.dali.training_stream can change the run: a pipeline that chooses its stream,
    on a device that has streams."""
    target, device = OmegaConf.select(cfg, "data._target_"), OmegaConf.select(cfg, "dist.accelerator")
    pipeline = _pipeline_class(target) if target is not None else None
    chooses = getattr(pipeline, "training_stream", None) not in (None, Pipeline.training_stream)
    return chooses and getattr(device, "value", device) != "cpu"


def reads_dali_keys(target: Optional[str], name: Optional[str] = None) -> bool:
    """Whether a data pipeline reads data.dali: its class (data._target_) is rn50.options.pipelines.Dali or
    one of its subclasses. A class that does not import counts as one that does; runs logged
    before data._target_ existed go by data.name."""
    if target is None:
        return name == Dali.name
    pipeline = _pipeline_class(target)
    return pipeline is None or issubclass(pipeline, Dali)


def config_hash(cfg: DictConfig) -> str:
    """A short fingerprint of everything in the resolved config that can change the figures."""
    # Hydra's own node is there in the configs a launcher loads for each job (and cannot resolve there).
    keys = [k for k in cfg if not leaves_out(f"{k}.", NOT_MEASURED) and k != "hydra"]
    measured = OmegaConf.to_container(OmegaConf.masked_copy(cfg, keys), resolve=True, enum_to_str=True)
    # <group>.name stands for the option, as in older hashes: a _target_ is a module path, which moves
    # with the code (issue 28 moved every built-in one) while the point stays the same.
    for group in ("data", "precision", "profiler", "cluster"):
        measured[group].pop("_target_", None)
    for dotted, default in MOVED_KEYS.items():  # every option had them before options had own schemas
        group, key = dotted.split(".")
        measured[group].setdefault(key, default)
    # Keys that change nothing of a run stay out, so that hashes of runs made before they existed
    # still match (sweep.resume): train for a throughput run, LARS's keys for SGD, resume, and
    # LATER_KEYS at their defaults.
    if measured["train"]["name"] == TrainName.throughput.value:
        del measured["train"]
    else:
        del measured["train"]["resume"]
    if measured["model"]["num_classes"] is None:
        # null hashes as the 1000 every point had before null existed: ImageNet's folders give
        # 1000 again, and another tree's narrower head hardly changes what a point measures.
        measured["model"]["num_classes"] = DEFAULT_CLASSES
    if measured["optim"]["name"] == OptimName.sgd.value:
        del measured["optim"]["name"], measured["optim"]["lars_trust"]
    if "dali" in measured["data"] and not reads_dali_keys(OmegaConf.select(cfg, "data._target_"),
                                                          OmegaConf.select(cfg, "data.name")):
        # Other pipelines ignore data.dali (experiment=fastest sets some): their points stay.
        measured["data"]["dali"] = OmegaConf.to_container(OmegaConf.structured(DaliConfig), enum_to_str=True)
    if not _has_training_stream(cfg):  # nothing changes whatever it says: their points stay
        measured["data"].get("dali", {}).pop("training_stream", None)
    if world_size(cfg) == 1:
        measured["dist"].pop("broadcast_buffers", None)  # one process has no DDP: its points stay
    for dotted, default in LATER_KEYS.items():  # at their values of before they existed
        *path, key = dotted.split(".")
        node = functools.reduce(dict.get, path, measured)
        if node is not None and node.get(key, default) == default:
            node.pop(key, None)
    return hashlib.sha256(json.dumps(measured, sort_keys=True).encode()).hexdigest()[:16]


def sweep_points(overrides: Sequence[str], params: Optional[Mapping[str, Any]] = None) -> List[List[str]]:
    """The jobs Hydra's basic sweeper makes, in its order, each as its overrides ("optim.lr=0.5"), as a
    job's `command` tag has them. overrides: hydra.overrides.task (or a sweep's `sweep.overrides` tag,
    split); params: hydra.sweeper.params, which the command line's overrides of the same key replace,
    as in the sweeper."""
    lines = [f"{key}={value}" for key, value in (params or {}).items()] + list(overrides)
    batches = BasicSweeper.split_arguments(OverridesParser.create().parse_overrides(lines), None)
    return [job for batch in batches for job in batch]


def sweep_size(overrides: Sequence[str], params: Optional[Mapping[str, Any]] = None) -> int:
    """How many jobs the sweep makes (the total of each point's line, rn50/measure/meter.py's point_line)."""
    return len(sweep_points(overrides, params))
