"""Data pipelines as components: each data option's YAML names its class with `_target_`, and
Hydra's instantiate builds it from the option's keys (cfg.data). The class answers three calls:

- check(cfg): compose-time checks of its keys, before any process starts (ConfigError, one line
  naming the key);
- preflight(cfg, world): checks of this host's files and libraries, in the launcher;
- build(cfg, endless): the Lightning data module, in each rank.

This module imports neither torch nor Lightning (the launcher builds these objects too): the
data modules a build returns live in rn50/data/, which `in_rank()` and `dali()` reach. Adding a
pipeline is one YAML file in conf/data/ (or on hydra.searchpath) and one class: nothing in rn50
lists them.
"""

import contextlib
import importlib.util
from typing import ContextManager

from omegaconf import DictConfig

from rn50.config.dali_schema import DaliDtype, DaliTrainingStream
from rn50.config.schema import Accelerator, TrainName
from rn50.config.reads import is_auto, positive
from rn50.errors import ConfigError, Rn50Error
from rn50.options import checks, components, precision


def in_rank():
    """The rank's data modules (rn50/data/modules.py): torch, torchvision and Lightning."""
    from rn50.data import modules  # deferred: only a rank imports torch; the launcher builds pipelines too

    return modules


def dali():
    """DALI's data module (rn50/data/dali.py), in a rank of data=dali only: DALI is an optional dependency."""
    try:
        from rn50.data import dali  # deferred: a rank's, and DALI is installed for data=dali only
    except ImportError as exc:
        if not (exc.name or "").startswith("nvidia"):
            raise
        raise Rn50Error(checks.MISSING_DALI) from exc
    return dali


def of(cfg: DictConfig) -> "Pipeline":
    """The run's data pipeline object, built from cfg.data's `_target_`. A run builds it once, with the
    other options (components.Options), and hands it on; this is for a caller that has none."""
    return components.of(cfg, "data")


def build(cfg: DictConfig, endless: bool = True):
    """The run's data module, in a rank, from its pipeline's class. endless (throughput runs): real
    data streams on across its epochs, so a data set smaller than the measured window never stalls
    at an epoch end."""
    return of(cfg).build(cfg, endless)


class Pipeline(components.Component):
    """What every data option answers. Its keys as composed (cfg.data) are `self.keys`, which the checks
    read; the calls take the run's cfg for what was decided after composing (the batch a search chose,
    the model's head) and the other groups' keys (the precision, train), and build() reads cfg.data."""

    labelled = True
    """Images with real labels: train=accuracy can learn from them."""
    unlabelled_why = "has no labels"
    """How train=accuracy's error says why it cannot learn from an unlabelled pipeline."""
    fixed_batch = False
    """Trains on one batch over and over, which a run that trains learns: its loss must fall."""
    def classes(self, cfg: DictConfig):
        """How many classes the data labels, in the launcher; None where the data does not say."""
        return None

    def preflight(self, cfg: DictConfig, world: int) -> None:
        """Checks of this host (files, libraries) before any rank starts; none by default."""

    def build(self, cfg: DictConfig, endless: bool):
        raise NotImplementedError(f"{type(self).__name__} builds no data module")

    def training_stream(self, cfg: DictConfig) -> ContextManager:
        """Where the rank trains, around everything it runs on the device: torch's current CUDA
        stream by default."""
        return contextlib.nullcontext()


class Synthetic(Pipeline):
    """One random batch kept on the device: the input pipeline costs nothing."""

    name, labelled, unlabelled_why, fixed_batch = "synthetic", False, "is random", True

    def build(self, cfg: DictConfig, endless: bool):
        d = cfg.data  # the run's, with the batch its search chose
        return in_rank().SyntheticData(d.batch_size, d.image_size, cfg.model.num_classes, cfg.model.channels_last, cfg.seed)


class FileReader(Pipeline):
    """A pipeline that reads data.root's ImageFolder tree (train/<class>/*, and val/ to evaluate)."""

    def classes(self, cfg: DictConfig) -> int:
        return len(checks.class_folders(self.keys.root))

    def check(self, cfg: DictConfig) -> None:
        positive(cfg, "data.num_workers", "use 1 or more workers", 1)
        if not self.keys.root:
            raise ConfigError(f"data.root is not set: data={self.keys.name} needs data.root=/path/to/imagenet "
                              "(with train/<class>/*.JPEG; python -m rn50.fake_imagenet makes one)")

    def preflight(self, cfg: DictConfig, world: int) -> None:
        batch = 1 if is_auto(cfg) else self.keys.batch_size  # auto: at least one image per rank
        checks.count_train_images(self.keys.root, batch * world)
        if cfg.train.name == TrainName.accuracy:
            checks.check_val_tree(self.keys.root, world)


class ImageFolder(FileReader):
    """torchvision's ImageFolder and DataLoader: JPEGs decoded on the CPU by data.num_workers processes."""

    name = "imagefolder"

    def build(self, cfg: DictConfig, endless: bool):
        d = cfg.data  # the run's, with the batch its search chose
        return in_rank().ImageFolderData(d.root, d.batch_size, d.image_size, d.num_workers, cfg.model.channels_last, cfg.seed,
                               endless=endless, validate=cfg.train.name == TrainName.accuracy)


class Dali(FileReader):
    """NVIDIA DALI: JPEGs decoded on the GPU (the CPU on a CPU run), with data.dali's levers."""

    name = "dali"

    @staticmethod
    def check_keys(cfg: DictConfig) -> None:
        """data.dali's ranges, whatever the pipeline (as the profiler's keys are checked; point/validate.py
        calls it). Every check of data.dali lives in this class: its dtype against the precision is
        check's, where data=dali reads the keys."""
        dali = cfg.data.dali
        if dali.num_threads is not None:
            positive(cfg, "data.dali.num_threads", "use 1 or more threads, or null for data.num_workers")
        positive(cfg, "data.dali.prefetch_queue_depth", "use 1 or more batches")
        if not 0 <= dali.hw_decoder_load <= 1:
            raise ConfigError(f"data.dali.hw_decoder_load={dali.hw_decoder_load} is out of range: "
                              "use a share from 0 to 1 (0.65 is DALI's default)")
        if not 0 <= dali.cpu_decode_share <= 1:
            raise ConfigError(f"data.dali.cpu_decode_share={dali.cpu_decode_share} is out of range: "
                              "use a share from 0 to 1 (0 decodes every JPEG on the GPU)")
        for key in ("device_memory_padding", "host_memory_padding", "preallocate_width_hint",
                    "preallocate_height_hint", "hybrid_huffman_threshold", "cache_size_mb"):
            positive(cfg, f"data.dali.{key}", "use 0 or more", 0)
        if dali.cache_size_mb and dali.cpu_decode_share:
            raise ConfigError(f"data.dali.cache_size_mb={dali.cache_size_mb} caches what the GPU decodes, and "
                              f"data.dali.cpu_decode_share={dali.cpu_decode_share} sends images past it to the CPU: "
                              "set data.dali.cpu_decode_share=0 with the cache, or data.dali.cache_size_mb=0")
        if dali.cpu_prefetch_queue_depth is not None:
            positive(cfg, "data.dali.cpu_prefetch_queue_depth", "use 1 or more batches, or null for one queue")
            for key in ("stream_policy", "concurrency"):
                if dali[key].value != "default":
                    raise ConfigError(f"data.dali.{key}={dali[key].value} applies to DALI's dynamic executor, which "
                                      "data.dali.cpu_prefetch_queue_depth turns off; set one of them only")

    def check(self, cfg: DictConfig) -> None:
        super().check(cfg)
        if self.keys.dali.output_dtype == DaliDtype.float16 and self._autocast(cfg) is None:
            raise ConfigError(
                f"data.dali.output_dtype=float16 needs an autocast precision (amp, amp_static, bf16), not "
                f"precision={cfg.precision.name}; use data.dali.output_dtype=auto or float32")

    def preflight(self, cfg: DictConfig, world: int) -> None:
        if importlib.util.find_spec("nvidia.dali") is None:
            raise ConfigError(checks.MISSING_DALI)
        super().preflight(cfg, world)

    def build(self, cfg: DictConfig, endless: bool):
        d = cfg.data  # the run's, with the batch its search chose
        fp16 = d.dali.output_dtype == DaliDtype.float16 or (
            d.dali.output_dtype == DaliDtype.auto and self._autocast(cfg) == "float16")
        threads = d.dali.num_threads if d.dali.num_threads is not None else d.num_workers
        return dali().DaliData(d.root, d.batch_size, d.image_size, threads, cfg.model.channels_last, fp16, cfg.seed,
                        options=d.dali, endless=endless, validate=cfg.train.name == TrainName.accuracy)

    def _autocast(self, cfg: DictConfig):
        """The run's precision's autocast dtype: its option's, where the run's options were built together."""
        return (self.run.precision if self.run is not None else precision.of(cfg)).autocast

    def training_stream(self, cfg: DictConfig) -> ContextManager:
        """data.dali.training_stream=own on a GPU: a stream of the rank's own on the current device,
        apart from torch's default stream, CUDA's legacy one, beside which DALI's pipeline ran
        slower (benchmarks/notes/2026-11-24-dali-levers.md, issue 14)."""
        if self.keys.dali.training_stream != DaliTrainingStream.own or cfg.dist.accelerator != Accelerator.gpu:
            return super().training_stream(cfg)
        return dali().own_stream()
