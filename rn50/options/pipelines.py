"""Data pipelines as components: each data option's YAML names its class with `_target_`, and
Hydra's instantiate builds it from the option's keys (cfg.data). The class answers three calls:

- check(cfg): compose-time checks of its keys, before any process starts (ConfigError, one line
  naming the key);
- preflight(cfg, world): checks of this host's files and libraries, in the launcher;
- build(cfg, endless): the Lightning data module, in each rank.

This module imports neither torch nor Lightning (the launcher builds these objects too); a
pipeline's build imports what it needs. Adding a pipeline is one YAML file in conf/data/ (or on
hydra.searchpath) and one class: nothing in rn50 lists them.
"""

import contextlib
import functools
from typing import ContextManager

from omegaconf import DictConfig

from rn50.options import components
from rn50.errors import ConfigError


def of(cfg: DictConfig) -> "Pipeline":
    """The run's data pipeline object, built from cfg.data's `_target_`."""
    return components.of(cfg, "data", "rn50.options.pipelines.Dali", "pipeline")


class Pipeline(components.Component):
    """What every data option answers. Its keys (cfg.data) arrive as keyword arguments."""

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
        from rn50.data.modules import SyntheticData

        d = cfg.data
        return SyntheticData(d.batch_size, d.image_size, cfg.model.num_classes, cfg.model.channels_last, cfg.seed)


class FileReader(Pipeline):
    """A pipeline that reads data.root's ImageFolder tree (train/<class>/*, and val/ to evaluate)."""

    def classes(self, cfg: DictConfig) -> int:
        from rn50.options import checks

        return len(checks.class_folders(cfg.data.root))

    def check(self, cfg: DictConfig) -> None:
        from rn50.config.schema import _positive

        _positive(cfg, "data.num_workers", "use 1 or more workers", 1)
        if not cfg.data.root:
            raise ConfigError(f"data.root is not set: data={cfg.data.name} needs data.root=/path/to/imagenet "
                              "(with train/<class>/*.JPEG; python -m rn50.fake_imagenet makes one)")

    def preflight(self, cfg: DictConfig, world: int) -> None:
        from rn50.rank import batch_search
        from rn50.options import checks
        from rn50.config.schema import TrainName

        batch = 1 if batch_search.is_auto(cfg) else cfg.data.batch_size  # auto: at least one image per rank
        checks.count_train_images(cfg.data.root, batch * world)
        if cfg.train.name == TrainName.accuracy:
            checks.check_val_tree(cfg.data.root, world)


class ImageFolder(FileReader):
    """torchvision's ImageFolder and DataLoader: JPEGs decoded on the CPU by data.num_workers processes."""

    name = "imagefolder"

    def build(self, cfg: DictConfig, endless: bool):
        from rn50.data.modules import ImageFolderData
        from rn50.config.schema import TrainName

        d = cfg.data
        return ImageFolderData(d.root, d.batch_size, d.image_size, d.num_workers, cfg.model.channels_last, cfg.seed,
                               endless=endless, validate=cfg.train.name == TrainName.accuracy)


class Dali(FileReader):
    """NVIDIA DALI: JPEGs decoded on the GPU (the CPU on a CPU run), with data.dali's levers."""

    name = "dali"

    def check(self, cfg: DictConfig) -> None:
        from rn50.options import precision
        from rn50.config.schema import DaliDtype

        super().check(cfg)
        if cfg.data.dali.output_dtype == DaliDtype.float16 and precision.of(cfg).autocast is None:
            raise ConfigError(
                f"data.dali.output_dtype=float16 needs an autocast precision (amp, amp_static, bf16), not "
                f"precision={cfg.precision.name}; use data.dali.output_dtype=auto or float32")

    def preflight(self, cfg: DictConfig, world: int) -> None:
        import importlib.util

        from rn50.options import checks

        if importlib.util.find_spec("nvidia.dali") is None:
            raise ConfigError(checks.MISSING_DALI)
        super().preflight(cfg, world)

    def build(self, cfg: DictConfig, endless: bool):
        from rn50.options import precision
        from rn50.data.dali import DaliData
        from rn50.config.schema import DaliDtype, TrainName

        d = cfg.data
        fp16 = d.dali.output_dtype == DaliDtype.float16 or (
            d.dali.output_dtype == DaliDtype.auto and precision.of(cfg).autocast == "float16")
        threads = d.dali.num_threads if d.dali.num_threads is not None else d.num_workers
        return DaliData(d.root, d.batch_size, d.image_size, threads, cfg.model.channels_last, fp16, cfg.seed,
                        options=d.dali, endless=endless, validate=cfg.train.name == TrainName.accuracy)

    def training_stream(self, cfg: DictConfig) -> ContextManager:
        """data.dali.training_stream=own on a GPU: a stream of the rank's own on the current device,
        apart from torch's default stream, CUDA's legacy one, beside which DALI's pipeline ran
        slower (docs/benchmarks.md, issue 14)."""
        from rn50.config.schema import Accelerator, DaliTrainingStream

        if cfg.data.dali.training_stream != DaliTrainingStream.own or cfg.dist.accelerator != Accelerator.gpu:
            return super().training_stream(cfg)
        import torch

        return torch.cuda.stream(_own_stream(torch.cuda.current_device()))


@functools.lru_cache(maxsize=None)
def _own_stream(device_index: int):
    """One per device and process: a warm rank reuses it run after run (each new stream would
    bring its own cuBLAS workspace). Normal priority: the highest measured the same."""
    import torch

    return torch.cuda.Stream(device_index)
