"""Whether a composed config can run: the range checks its types cannot express, each option's
own checks, and keys added with + that the schema does not declare. Each failure is one
ConfigError naming the dotted key and what would work."""

from typing import Optional

from omegaconf import DictConfig

from rn50.config import keys
from rn50.config.compilation import check_cuda_graphs
from rn50.config.messages import unknown_key_message
from rn50.config.schema import MIN_IMAGE_SIZE, OptimName, TrainName
from rn50.config.reads import AUTO_BATCH, positive
from rn50.errors import ConfigError
from rn50.options import pipelines
from rn50.options.components import Options


def check_declared(cfg) -> None:
    """Raise ConfigError for the first key the schema does not declare, with the closest declared one."""
    unknown = keys.undeclared_keys(cfg)
    if unknown:
        raise ConfigError(unknown_key_message(unknown[0]))


def validate(cfg: DictConfig, options: Optional[Options] = None) -> DictConfig:
    """Range checks the types cannot express; a pure check, which changes nothing (what preflight decides
    after it is launcher/launch.py's). Raises ConfigError naming the dotted key.
    options: the run's (components.Options), where the caller built them; else they are built here,
    once, where the first option's checks begin."""
    _check_batch_size(cfg)
    positive(
        cfg,
        "data.image_size",
        f"ResNets downsample by 32, use data.image_size >= {MIN_IMAGE_SIZE}",
        MIN_IMAGE_SIZE,
    )
    if cfg.model.num_classes is not None:
        positive(cfg, "model.num_classes", "use 2 or more classes, or null to follow the data", 2)
    positive(cfg, "dist.nodes", "use 1 or more nodes")
    positive(cfg, "dist.gpus_per_node", "use 1 or more processes per node")
    positive(cfg, "bench.warmup_steps", "use 1 or more: the first step autotunes and compiles")
    positive(cfg, "bench.steps", "use 1 or more measured steps")
    positive(cfg, "bench.repeats", "use 1 or more measured windows")
    positive(cfg, "bench.comm_iters", "use 0 to time no all-reduce, or 1 or more (nccl-tests times 20)", 0)
    positive(cfg, "telemetry.interval_s", "use a positive sampling interval", 0.01)
    pipelines.Dali.check_keys(cfg)
    options = options or Options.of(cfg)
    pipeline = options.data
    pipeline.check(cfg)
    positive(cfg, "optim.lr", "use a learning rate above 0", 1e-12)
    positive(cfg, "optim.momentum", "use a momentum of 0 or more", 0)
    positive(cfg, "optim.weight_decay", "use a weight decay of 0 or more", 0)
    positive(cfg, "optim.lars_trust", "use a trust coefficient above 0", 1e-12)
    if cfg.optim.name == OptimName.lars and cfg.optim.fused:
        raise ConfigError("optim.fused=true: LARS has no fused kernel (it unscales and skips overflowed steps on "
                          "the device by itself); use optim.fused=null with optim.name=lars")
    if cfg.train.name == TrainName.accuracy:
        _check_training(cfg, pipeline)
    options.precision.check(cfg)
    options.cluster.check(cfg)
    if cfg.mfu.peak_tflops is not None:
        positive(cfg, "mfu.peak_tflops", "give the GPU's peak dense TFLOP/s, or null", 1e-6)
    options.profiler.check(cfg)
    check_cuda_graphs(cfg)
    return cfg


def _check_batch_size(cfg: DictConfig) -> None:
    """data.batch_size is Any in the schema (int or "auto"), so its type is checked here."""
    value = cfg.data.batch_size
    if value == AUTO_BATCH:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"data.batch_size={value}: use a positive integer or auto")
    positive(cfg, "data.batch_size", "use a batch size of 1 or more per device")


def _check_training(cfg: DictConfig, pipeline) -> None:
    """train=accuracy's keys, and what it needs of the others."""
    if not pipeline.labelled:
        raise ConfigError(f"train=accuracy needs labelled images but data={cfg.data.name} {pipeline.unlabelled_why}; use "
                          "data=imagefolder or data=dali with data.root=/path/to/imagenet (train/ and val/)")
    if cfg.data.batch_size == AUTO_BATCH:
        raise ConfigError("data.batch_size=auto searches for throughput only; train=accuracy needs a fixed "
                          "batch (the learning rate scales with it), e.g. data.batch_size=256")
    target = cfg.train.target_top1
    if target is None or not 0 < target <= 1:
        raise ConfigError(f"train.target_top1={target} is out of range: use a fraction in (0, 1], e.g. 0.759")
    positive(cfg, "train.epochs", "use 1 or more epochs")
    positive(cfg, "train.eval_every_epochs", "use 1 or more epochs between evaluations")
    positive(cfg, "train.lr_warmup_epochs", "use 0 or more warm-up epochs", 0)
    if cfg.train.lr_warmup_epochs >= cfg.train.epochs:
        raise ConfigError(f"train.lr_warmup_epochs={cfg.train.lr_warmup_epochs} is out of range: use fewer "
                          f"than train.epochs={cfg.train.epochs}")
    smoothing = cfg.train.label_smoothing
    if not 0 <= smoothing < 1:
        raise ConfigError(f"train.label_smoothing={smoothing} is out of range: use 0 <= value < 1")
